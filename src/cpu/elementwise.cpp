// ReLU and the residual addition. Elementwise, so any split across threads gives the same
// bits, and in-place calls are safe.
#include <cstdint>

#include "parallel.h"
#include "resnet_ddp/cpu/layers.h"

namespace rddp::cpu {

template <typename T>
void relu_forward(int64_t count, const T* x, T* y) {
  // `x < 0 ? 0 : x` rather than max(x, 0): NaN and -0.0 pass through, as torch.relu does.
#pragma omp parallel for simd schedule(static) if (count >= kMinParallelElements)
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

template <typename T>
void relu_backward(int64_t count, const T* y, const T* dy, T* dx) {
  // torch's threshold_backward zeroes where y <= 0, so a NaN output lets the gradient through.
#pragma omp parallel for simd schedule(static) if (count >= kMinParallelElements)
  for (int64_t i = 0; i < count; ++i) dx[i] = y[i] <= T(0) ? T(0) : dy[i];
}

template <typename T>
void add(int64_t count, const T* x, const T* y, T* z) {
#pragma omp parallel for simd schedule(static) if (count >= kMinParallelElements)
  for (int64_t i = 0; i < count; ++i) z[i] = x[i] + y[i];
}

#define RDDP_INSTANTIATE_ELEMENTWISE(T)                                \
  template void relu_forward<T>(int64_t, const T*, T*);                \
  template void relu_backward<T>(int64_t, const T*, const T*, T*);     \
  template void add<T>(int64_t, const T*, const T*, T*);
RDDP_INSTANTIATE_ELEMENTWISE(float)
RDDP_INSTANTIATE_ELEMENTWISE(double)
#undef RDDP_INSTANTIATE_ELEMENTWISE

}  // namespace rddp::cpu
