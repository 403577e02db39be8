// Built with -mavx2 (CMakeLists.txt) and run only where the CPU reports AVX2 (gemm.cpp).
#include "gemm_blocked.h"
#include "gemm_kernels.h"

namespace rddp::cpu {

// Twice the lanes of SSE: 6x16 float accumulators are twelve 8-wide vectors, and doubles again
// half the columns. Wider tiles change which tile holds an element, not the order of its sum.
void gemm_avx2(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c,
               int ldc) {
  gemm_blocked<float, 6, 16>(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                             ldc);
}

void gemm_avx2(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha,
               const double* a, int lda, const double* b, int ldb, double beta,
               double* c, int ldc) {
  gemm_blocked<double, 6, 8>(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                             ldc);
}

}  // namespace rddp::cpu
