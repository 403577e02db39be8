#pragma once
// The CPU reference layers: plain C++ over NCHW tensors, readable first. Every function is a
// template over the scalar (float for training, double for gradient checks) and overwrites
// its outputs (gradients are not accumulated).
#include <cstdint>

#include "resnet_ddp/layer_shapes.h"

namespace rddp::cpu {

// y[n, co, oh, ow] = sum over ci, kh, kw of w[co, ci, kh, kw] * x[n, ci, oh*s - p + kh, ...]
// (no bias: every convolution of ResNet is followed by BatchNorm). Throws Error when the
// kernel does not fit the padded input.
template <typename T>
void conv2d_forward(const ConvShape& shape, const T* x, const T* w, T* y);
template <typename T>
void conv2d_backward_data(const ConvShape& shape, const T* dy, const T* w, T* dx);
template <typename T>
void conv2d_backward_filter(const ConvShape& shape, const T* x, const T* dy, T* dw);

struct BatchNormShape {
  int batch = 1, channels = 1, height = 1, width = 1;
};

// Training mode, as torch.nn.BatchNorm2d: normalise with the batch mean and biased variance;
// running_mean/var move by `momentum` towards the batch mean and the *unbiased* variance.
// save_mean / save_invstd (1/sqrt(var + eps)) are kept for backward. Throws Error when a
// channel has a single value (batch * height * width == 1), as PyTorch refuses it too.
// Sums are taken in double whatever T is.
template <typename T>
void batchnorm_forward_train(const BatchNormShape& shape, const T* x, const T* gamma, const T* beta,
                             T momentum, T eps, T* running_mean, T* running_var, T* y,
                             T* save_mean, T* save_invstd);
// Evaluation mode: normalise with the running statistics.
template <typename T>
void batchnorm_forward_eval(const BatchNormShape& shape, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, T eps, T* y);
// Backward of training mode (the batch statistics depend on x).
template <typename T>
void batchnorm_backward(const BatchNormShape& shape, const T* x, const T* dy, const T* gamma,
                        const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

// In place is allowed (y == x, dx == dy). Backward uses the output: dx = dy where y > 0.
// As torch.relu: NaN and -0.0 pass through forward, and a NaN output passes its gradient.
template <typename T>
void relu_forward(int64_t count, const T* x, T* y);
template <typename T>
void relu_backward(int64_t count, const T* y, const T* dy, T* dx);

// Max pooling (layer_shapes.h). `argmax` records, for each output, the flat index of the chosen
// input within its (n, c) plane: the first maximum in row-major window order, as PyTorch picks
// it; a NaN in the window is chosen (the last one if several). Throws Error when
// pad > kernel / 2 (PyTorch's limit).
template <typename T>
void maxpool_forward(const PoolShape& shape, const T* x, T* y, int32_t* argmax);
template <typename T>
void maxpool_backward(const PoolShape& shape, const T* dy, const int32_t* argmax, T* dx);

// Global average pooling: [N, C, H, W] -> [N, C].
template <typename T>
void global_avgpool_forward(int batch, int channels, int spatial, const T* x, T* y);
template <typename T>
void global_avgpool_backward(int batch, int channels, int spatial, const T* dy, T* dx);

// Fully connected, as nn.Linear: y[N, out] = x[N, in] * w[out, in]^T + b[out].
template <typename T>
void linear_forward(int batch, int in_features, int out_features, const T* x, const T* w,
                    const T* b, T* y);
// dx may be null (the first layer needs none); dw and db are overwritten.
template <typename T>
void linear_backward(int batch, int in_features, int out_features, const T* x, const T* w,
                     const T* dy, T* dx, T* dw, T* db);

// z = x + y, elementwise (the residual connection); z may alias x or y.
template <typename T>
void add(int64_t count, const T* x, const T* y, T* z);

}  // namespace rddp::cpu
