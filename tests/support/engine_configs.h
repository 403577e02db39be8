#pragma once
// The engine settings the GPU engine tests share, so that a test of one precision or layout
// differs from another's only where it says so.
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/memory_format.h"

namespace rddp::testing {

// Real ResNet-18 widths and 10 classes on small images: the cifar stem at 32x32, the imagenet
// stem at 64x64 (its stride-2 convolution and max pooling leave 16x16 to layer1). Label smoothing
// 0.1, so that its term of the loss and its gradient are checked too.
inline EngineConfig small_image_config(Stem stem, int max_batch,
                                       Precision precision = Precision::fp32) {
  EngineConfig config;
  config.spec.stem = stem;
  config.spec.num_classes = 10;
  config.max_batch = max_batch;
  config.height = config.width = stem == Stem::cifar ? 32 : 64;
  config.label_smoothing = 0.1;
  config.precision = precision;
  return config;
}

// Convolution algorithms chosen by cuDNN's heuristic rather than timed: timing could choose
// other algorithms for two engines of one test, and they round differently.
inline CudaEngineOptions heuristic_options() {
  CudaEngineOptions options;
  options.conv_search = cuda::ConvAlgorithmSearch::heuristic;
  return options;
}

// Deterministic algorithms too, for tests that compare bits: by heuristic unless `search` says
// otherwise.
inline CudaEngineOptions exact_options(
    cuda::ConvAlgorithmSearch search = cuda::ConvAlgorithmSearch::heuristic) {
  CudaEngineOptions options;
  options.deterministic = true;
  options.conv_search = search;
  return options;
}

// `options` with the activations laid out in `format`.
inline CudaEngineOptions in_format(CudaEngineOptions options, MemoryFormat format) {
  options.memory_format = format;
  return options;
}

// `options` with `batchnorm`'s kernels.
inline CudaEngineOptions with_batchnorm(CudaEngineOptions options, BatchNormImpl batchnorm) {
  options.batchnorm = batchnorm;
  return options;
}

}  // namespace rddp::testing
