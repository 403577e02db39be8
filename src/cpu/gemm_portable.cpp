#include "gemm_blocked.h"
#include "gemm_kernels.h"

namespace rddp::cpu {

// 6x8 float accumulators are twelve 4-wide SSE vectors, leaving room in 16 registers for a
// row of B and a broadcast of A; doubles fill half the lanes, so half the columns.
void gemm_portable(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) {
  gemm_blocked<float, 6, 8>(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                            ldc);
}

void gemm_portable(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha,
                   const double* a, int lda, const double* b, int ldb, double beta,
                   double* c, int ldc) {
  gemm_blocked<double, 6, 4>(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                             ldc);
}

}  // namespace rddp::cpu
