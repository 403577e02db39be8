#include "resnet_ddp/cpu/gemm.h"

#include <algorithm>
#include <cstdint>

#include "gemm_kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cpu {

namespace {

bool cpu_has_avx2() {
#if defined(RDDP_GEMM_AVX2) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

template <typename T>
void scale_c(int m, int n, T beta, T* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    T* row = c + static_cast<int64_t>(i) * ldc;
    for (int j = 0; j < n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
  }
}

}  // namespace

const char* to_string(GemmKernel kernel) {
  return kernel == GemmKernel::avx2 ? "avx2" : "portable";
}

bool gemm_kernel_available(GemmKernel kernel) {
  return kernel == GemmKernel::portable || cpu_has_avx2();
}

GemmKernel gemm_kernel() { return cpu_has_avx2() ? GemmKernel::avx2 : GemmKernel::portable; }

template <typename T>
void gemm_using(GemmKernel kernel, bool transpose_a, bool transpose_b, int m, int n, int k,
                T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  RDDP_ASSERT(m >= 0 && n >= 0 && k >= 0);
  RDDP_ASSERT(lda >= std::max(1, transpose_a ? m : k));
  RDDP_ASSERT(ldb >= std::max(1, transpose_b ? k : n));
  RDDP_ASSERT(ldc >= std::max(1, n));
  RDDP_ASSERT(gemm_kernel_available(kernel));
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
#ifdef RDDP_GEMM_AVX2
  const GemmFunctions& functions = kernel == GemmKernel::avx2 ? kAvx2Gemm : kPortableGemm;
#else
  const GemmFunctions& functions = kPortableGemm;
#endif
  functions.of<T>()(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc) {
  gemm_using(gemm_kernel(), transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
             ldc);
}

template void gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*, int,
                          float, float*, int);
template void gemm<double>(bool, bool, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int);
template void gemm_using<float>(GemmKernel, bool, bool, int, int, int, float, const float*, int,
                                const float*, int, float, float*, int);
template void gemm_using<double>(GemmKernel, bool, bool, int, int, int, double, const double*,
                                 int, const double*, int, double, double*, int);

}  // namespace rddp::cpu
