// BatchNorm2d as PyTorch computes it on the CPU. Statistics and gradient sums are taken in
// double even for float tensors: a channel of a 224x224 batch sums millions of values, and
// float sums would drift from PyTorch's by more than the parity tolerances allow. Channels are
// independent, so threads split them and every sum keeps its serial order.
#include <cmath>
#include <cstdint>

#include "parallel.h"
#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/error.h"

namespace rddp::cpu {

namespace {

int64_t values_per_channel(const BatchNormShape& s) {
  return static_cast<int64_t>(s.batch) * s.height * s.width;
}

void check_batchnorm(const BatchNormShape& s) {
  if (s.batch < 1 || s.channels < 1 || s.height < 1 || s.width < 1)
    fail("batchnorm: shape ", s.batch, "x", s.channels, "x", s.height, "x", s.width,
         " has an empty dimension; every dimension must be >= 1");
}

// y = x * scale + shift over one channel, the form PyTorch's CPU kernel evaluates.
template <typename T>
void affine_channel(const BatchNormShape& s, int c, const T* x, double scale, double shift, T* y) {
  const int64_t plane = static_cast<int64_t>(s.height) * s.width;
  const T scale_t = static_cast<T>(scale), shift_t = static_cast<T>(shift);
  for (int n = 0; n < s.batch; ++n) {
    const int64_t offset = (static_cast<int64_t>(n) * s.channels + c) * plane;
    for (int64_t i = 0; i < plane; ++i) y[offset + i] = x[offset + i] * scale_t + shift_t;
  }
}

}  // namespace

template <typename T>
void batchnorm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                             T momentum, T eps, T* running_mean, T* running_var, T* y,
                             T* save_mean, T* save_invstd) {
  check_batchnorm(s);
  const int64_t count = values_per_channel(s);
  if (count == 1)
    fail("batchnorm: batch * height * width is 1 at this layer (input ", s.batch, "x", s.channels,
         "x", s.height, "x", s.width, "), so a channel has a single value and no variance ",
         "(PyTorch: \"Expected more than 1 value per channel when training\"); use a batch of ",
         "at least 2 or a larger input image");
  const int64_t plane = static_cast<int64_t>(s.height) * s.width;
#pragma omp parallel for schedule(static) if (count * s.channels >= kMinParallelElements)
  for (int c = 0; c < s.channels; ++c) {
    // Two passes: the mean first, then the squared deviations from it, which cannot cancel
    // catastrophically the way sum(x^2) - n * mean^2 does.
    double sum = 0.0;
    for (int n = 0; n < s.batch; ++n) {
      const T* x_nc = x + (static_cast<int64_t>(n) * s.channels + c) * plane;
      for (int64_t i = 0; i < plane; ++i) sum += x_nc[i];
    }
    const double mean = sum / static_cast<double>(count);
    double squares = 0.0;
    for (int n = 0; n < s.batch; ++n) {
      const T* x_nc = x + (static_cast<int64_t>(n) * s.channels + c) * plane;
      for (int64_t i = 0; i < plane; ++i) {
        const double deviation = x_nc[i] - mean;
        squares += deviation * deviation;
      }
    }
    const double variance = squares / static_cast<double>(count);  // biased: normalises
    const double unbiased = squares / static_cast<double>(count - 1);  // tracked for eval
    const double invstd = 1.0 / std::sqrt(variance + static_cast<double>(eps));
    const double m = momentum;
    running_mean[c] = static_cast<T>((1.0 - m) * running_mean[c] + m * mean);
    running_var[c] = static_cast<T>((1.0 - m) * running_var[c] + m * unbiased);
    save_mean[c] = static_cast<T>(mean);
    save_invstd[c] = static_cast<T>(invstd);
    const double scale = invstd * gamma[c];
    affine_channel(s, c, x, scale, beta[c] - mean * scale, y);
  }
}

template <typename T>
void batchnorm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, T eps, T* y) {
  check_batchnorm(s);
  const int64_t count = values_per_channel(s);
#pragma omp parallel for schedule(static) if (count * s.channels >= kMinParallelElements)
  for (int c = 0; c < s.channels; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
    const double scale = invstd * gamma[c];
    affine_channel(s, c, x, scale, beta[c] - running_mean[c] * scale, y);
  }
}

template <typename T>
void batchnorm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma,
                        const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta) {
  check_batchnorm(s);
  const int64_t count = values_per_channel(s);
  const int64_t plane = static_cast<int64_t>(s.height) * s.width;
#pragma omp parallel for schedule(static) if (count * s.channels >= kMinParallelElements)
  for (int c = 0; c < s.channels; ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t offset = (static_cast<int64_t>(n) * s.channels + c) * plane;
      for (int64_t i = 0; i < plane; ++i) {
        sum_dy += dy[offset + i];
        sum_dy_xhat += dy[offset + i] * ((x[offset + i] - mean) * invstd);
      }
    }
    dbeta[c] = static_cast<T>(sum_dy);
    dgamma[c] = static_cast<T>(sum_dy_xhat);
    // dx = gamma * invstd / n * (n * dy - sum(dy) - xhat * sum(dy * xhat)), expanded to
    // dx = dy * scale - xhat * xhat_coef - shift so that the inner loop is two products.
    const double n_inv = 1.0 / static_cast<double>(count);
    const double scale = gamma[c] * invstd;
    const double xhat_coef = scale * sum_dy_xhat * n_inv;
    const double shift = scale * sum_dy * n_inv;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t offset = (static_cast<int64_t>(n) * s.channels + c) * plane;
      for (int64_t i = 0; i < plane; ++i) {
        const double xhat = (x[offset + i] - mean) * invstd;
        dx[offset + i] = static_cast<T>(dy[offset + i] * scale - xhat * xhat_coef - shift);
      }
    }
  }
}

#define RDDP_INSTANTIATE_BATCHNORM(T)                                                          \
  template void batchnorm_forward_train<T>(const BatchNormShape&, const T*, const T*, const T*, \
                                           T, T, T*, T*, T*, T*, T*);                          \
  template void batchnorm_forward_eval<T>(const BatchNormShape&, const T*, const T*, const T*, \
                                          const T*, const T*, T, T*);                          \
  template void batchnorm_backward<T>(const BatchNormShape&, const T*, const T*, const T*,     \
                                      const T*, const T*, T*, T*, T*);
RDDP_INSTANTIATE_BATCHNORM(float)
RDDP_INSTANTIATE_BATCHNORM(double)
#undef RDDP_INSTANTIATE_BATCHNORM

}  // namespace rddp::cpu
