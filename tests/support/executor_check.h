#pragma once
// One training forward, backward and evaluation forward of the whole CUDA network against the
// CPU executor in double, from identical parameters: the check the float32, bfloat16 and NHWC
// GPU tests each make of their executor settings, with their own tolerances.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/executor.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/engine_batches.h"
#include "support/engine_configs.h"
#include "support/mixed_precision_check.h"
#include "support/relu_ties.h"

namespace rddp::testing {

// Non-trivial BatchNorm affine parameters and running statistics, so that none of their
// gradients or updates is a special case.
template <typename T>
void perturb_batchnorm(ModelState<T>& state, uint64_t seed) {
  Rng rng(seed);
  for (const TensorInfo& info : state.layout.tensors()) {
    if (info.role == TensorRole::parameter && info.shape.size() == 1 && info.name != "fc.bias")
      for (size_t i = 0; i < info.numel; ++i) state.params[info.offset + i] += 0.3 * rng.normal();
    if (info.role == TensorRole::running_stat)
      for (size_t i = 0; i < info.numel; ++i) state.running[info.offset + i] += 0.2 * rng.uniform();
  }
}

// What the executor is built with. Convolution algorithms are timed, as training chooses them,
// unless `search` says otherwise, but only deterministic ones; what stays float is strict
// float32, since the reference is double.
struct ExecutorSetting {
  Stem stem = Stem::cifar;
  bool bf16 = false;  // bfloat16 activations and weight copies, else float32
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  BatchNormImpl batchnorm = BatchNormImpl::cudnn;
  cuda::ConvAlgorithmSearch search = cuda::ConvAlgorithmSearch::timed;
  cuda::ConvApi api = cuda::ConvApi::legacy;
};

// What one check saw, for checks that compare runs: every gradient as downloaded, and the
// convolution algorithms the executor chose (ConvAlgorithmCache::summary).
struct ExecutorRun {
  std::vector<float> grads;
  std::string algorithms;
};

// Logits (training and evaluation), every gradient in PyTorch's layout and the running
// statistics, each tensor within `tolerance` (check_mixed_tensor); the worst errors go to
// `ledger`. Gradients are poisoned first, so an element no kernel wrote fails.
inline ExecutorRun check_executor_against_cpu(const ExecutorSetting& setting,
                                              const MixedTolerance& tolerance,
                                              ErrorLedger* ledger) {
  const std::string stem_name = to_string(setting.stem);
  const std::string activations = setting.bf16 ? "bf16" : "fp32";
  const std::string layout = setting.format == CUDNN_TENSOR_NHWC ? "nhwc" : "nchw";
  const std::string batchnorm = to_string(setting.batchnorm);
  CAPTURE(stem_name);
  CAPTURE(activations);
  CAPTURE(layout);
  CAPTURE(batchnorm);
  const std::string conv_api = cuda::to_string(setting.api);
  CAPTURE(conv_api);
  const EngineConfig config = small_image_config(setting.stem, 4);
  const int batch = config.max_batch;
  const int classes = config.spec.num_classes;

  ModelState<double> reference(config.spec);
  init_torchvision(reference, 7);
  perturb_batchnorm(reference, 8);
  // The GPU's copy holds the same values rounded to float, and the reference takes them back,
  // so both start from identical numbers.
  ModelState<float> model(config.spec);
  model.params.assign(reference.params.begin(), reference.params.end());
  model.running.assign(reference.running.begin(), reference.running.end());
  reference.params.assign(model.params.begin(), model.params.end());
  reference.running.assign(model.running.begin(), model.running.end());
  // The caller's input is NCHW float in both layouts.
  const Batch data = random_batch(config, batch, 11);
  const std::vector<double> input64(data.images.begin(), data.images.end());
  // Float32 is checked element by element, which a ReLU input at zero would defeat
  // (relu_ties.h); bfloat16's errors dwarf the margin, and its tolerance allows for them.
  if (!setting.bf16) {
    clear_relu_ties(reference, input64, batch, config.height, config.width);
    model.params.assign(reference.params.begin(), reference.params.end());
  }

  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  const cuda::DeviceBuffer<float> params = to_device(model.params, stream);
  const cuda::DeviceBuffer<float> running = to_device(model.running, stream);
  cuda::DeviceBuffer<float> grads(model.grads.size());
  cuda::DeviceBuffer<__nv_bfloat16> params_bf16(setting.bf16 ? model.params.size() : 0);
  if (setting.bf16)
    cuda::convert(static_cast<int64_t>(params.size()), params.get(), params_bf16.get(), stream);
  cuda::ExecutorOptions options;
  options.math.allow_tf32 = false;
  options.math.deterministic = true;
  options.math.data_type = setting.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  options.math.format = setting.format;
  options.math.search = setting.search;
  options.math.api = setting.api;
  options.batchnorm = setting.batchnorm;
  cuda::Executor executor(model.net, model.layout,
                          cuda::DeviceModel{params.get(), grads.get(), running.get(),
                                            setting.bf16 ? params_bf16.get() : nullptr},
                          batch, config.height, config.width, context, options);
  cpu::Executor<double> cpu_executor(reference, batch, config.height, config.width);

  const cuda::DeviceBuffer<float> input = to_device(data.images, stream);

  const size_t logit_count = static_cast<size_t>(batch) * classes;
  const double* want_logits = cpu_executor.forward(input64.data(), batch, true);
  const auto logits =
      cuda::download(executor.forward(input.get(), batch, true), logit_count, stream);
  const double logit_error =
      check_mixed_tensor("logits", logits.data(), want_logits, logit_count, tolerance, ledger);
  // bfloat16 really was used: float32 maths agrees to about 1e-6, bfloat16 to about 1e-2.
  if (setting.bf16) CHECK(logit_error > 0x1p-14);

  // Backward from the same d(loss)/d(logits) on both sides, the reference's rounded to float,
  // so that only backward is compared.
  std::vector<double> dlogits64(logit_count);
  cpu::softmax_cross_entropy<double>(want_logits, data.labels.data(), batch, classes,
                                     config.label_smoothing, dlogits64.data());
  const std::vector<float> dlogits(dlogits64.begin(), dlogits64.end());
  dlogits64.assign(dlogits.begin(), dlogits.end());
  const cuda::DeviceBuffer<float> d_dlogits = to_device(dlogits, stream);
  // All bits set: NaN in float.
  RDDP_CUDA_CHECK(cudaMemsetAsync(grads.get(), 0xff, grads.bytes(), stream));
  std::vector<std::string> cpu_order, gpu_order;
  cpu_executor.backward(dlogits64.data(),
                        [&](const TensorInfo& info) { cpu_order.push_back(info.name); });
  executor.backward(d_dlogits.get(),
                    [&](const TensorInfo& info) { gpu_order.push_back(info.name); });
  CHECK(gpu_order == cpu_order);

  // Every gradient in PyTorch's layout: an NHWC convolution gradient left in OHWI fails here.
  const auto got_grads = cuda::download(grads.get(), grads.size(), stream);
  const auto got_running = cuda::download(running.get(), running.size(), stream);
  for (const TensorInfo& info : model.layout.tensors()) {
    if (info.role == TensorRole::parameter)
      check_mixed_tensor("gradient " + info.name, got_grads.data() + info.offset,
                         reference.grads.data() + info.offset, info.numel, tolerance, ledger);
    if (info.role == TensorRole::running_stat)
      check_mixed_tensor("after training forward " + info.name, got_running.data() + info.offset,
                         reference.running.data() + info.offset, info.numel, tolerance, ledger);
  }

  // Evaluation mode uses the running statistics just updated, on both sides.
  const double* want_eval = cpu_executor.forward(input64.data(), batch, false);
  const auto eval_logits =
      cuda::download(executor.forward(input.get(), batch, false), logit_count, stream);
  check_mixed_tensor("eval logits", eval_logits.data(), want_eval, logit_count, tolerance,
                     ledger);
  return {got_grads, executor.algorithms().summary()};
}

}  // namespace rddp::testing
