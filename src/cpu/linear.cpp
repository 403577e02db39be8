// nn.Linear on the GEMM: y = x w^T + b, dx = dy w, dw = dy^T x, db = column sums of dy.
#include <cstdint>

#include "resnet_ddp/cpu/gemm.h"
#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/error.h"

namespace rddp::cpu {

namespace {

void check_linear(int batch, int in_features, int out_features) {
  if (batch < 1 || in_features < 1 || out_features < 1)
    fail("linear: batch ", batch, ", in_features ", in_features, " and out_features ",
         out_features, " must all be >= 1");
}

}  // namespace

template <typename T>
void linear_forward(int batch, int in_features, int out_features, const T* x, const T* w,
                    const T* b, T* y) {
  check_linear(batch, in_features, out_features);
  // Start every row from the bias, as addmm does, then add the product.
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out_features; ++o) y[static_cast<int64_t>(n) * out_features + o] = b[o];
  gemm<T>(false, true, batch, out_features, in_features, T(1), x, in_features, w, in_features,
          T(1), y, out_features);
}

template <typename T>
void linear_backward(int batch, int in_features, int out_features, const T* x, const T* w,
                     const T* dy, T* dx, T* dw, T* db) {
  check_linear(batch, in_features, out_features);
  if (dx)
    gemm<T>(false, false, batch, in_features, out_features, T(1), dy, out_features, w,
            in_features, T(0), dx, in_features);
  gemm<T>(true, false, out_features, in_features, batch, T(1), dy, out_features, x, in_features,
          T(0), dw, in_features);
  for (int o = 0; o < out_features; ++o) {
    double sum = 0.0;
    for (int n = 0; n < batch; ++n) sum += dy[static_cast<int64_t>(n) * out_features + o];
    db[o] = static_cast<T>(sum);
  }
}

#define RDDP_INSTANTIATE_LINEAR(T)                                                           \
  template void linear_forward<T>(int, int, int, const T*, const T*, const T*, T*);          \
  template void linear_backward<T>(int, int, int, const T*, const T*, const T*, T*, T*, T*);
RDDP_INSTANTIATE_LINEAR(float)
RDDP_INSTANTIATE_LINEAR(double)
#undef RDDP_INSTANTIATE_LINEAR

}  // namespace rddp::cpu
