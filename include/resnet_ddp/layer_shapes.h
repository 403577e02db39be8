#pragma once
// The shapes of a convolution and of a pooling window, shared by the CPU reference layers, the
// CUDA kernels and cuDNN's descriptors, so that none of them reaches into another for them.

namespace rddp {

struct ConvShape {
  int batch = 1, in_channels = 1, in_h = 1, in_w = 1;
  int out_channels = 1, kernel = 1, stride = 1, pad = 0;
  int out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
};

// Max pooling, kernel k, stride s, padding p (padding never wins).
struct PoolShape {
  int batch = 1, channels = 1, in_h = 1, in_w = 1, kernel = 3, stride = 2, pad = 1;
  int out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
};

}  // namespace rddp
