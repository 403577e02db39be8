#pragma once
// The arithmetic of training ResNet-18, counted from the layer shapes the way PyTorch
// benchmarks count it, so that TFLOP/s and MFU mean the same on both sides of a comparison.
// bench/pytorch_ddp.py counts the same from the torchvision model's own layers (forward hooks),
// and bench/compare_throughput.py refuses to compare runs whose counts differ.
#include <cmath>

#include "resnet_ddp/model_spec.h"

namespace rddp {

constexpr const char* kTrainingFlopsFormula =
    "3 x 2 x forward MACs (convolutions and fc; BatchNorm, ReLU, pooling and additions not "
    "counted): 2 FLOPs per multiply-add, and backward costs two forwards (data and weights)";

// Multiply-adds of one image's forward pass through every convolution and the classifier.
inline double forward_macs(const NetDesc& net, int size) {
  double macs = 0.0;
  for_each_conv(net, size, [&macs](const ConvDesc& c, int in) {
    const int out = window_output_size(in, c.kernel, c.stride, c.pad);
    macs += static_cast<double>(out) * out * c.out_channels * c.in_channels * c.kernel * c.kernel;
  });
  return macs + static_cast<double>(net.fc.in_features) * net.fc.out_features;
}

// kTrainingFlopsFormula. The stem convolution needs no gradient of its input, so this counts
// one pass more than is computed there, as the common convention does.
inline double training_flops_per_image(const NetDesc& net, int size) {
  return 3.0 * 2.0 * forward_macs(net, size);
}

// Model FLOP utilisation: the FLOP/s that one GPU's images/s come to over the GPU's dense peak
// (TFLOP/s, gpu_peaks.h); NaN where the peak is unknown (0).
inline double model_flop_utilisation(double images_per_s_per_gpu, double flops_per_image,
                                     double peak_tflops) {
  if (!(peak_tflops > 0)) return std::nan("");
  return images_per_s_per_gpu * flops_per_image / (peak_tflops * 1e12);
}

}  // namespace rddp
