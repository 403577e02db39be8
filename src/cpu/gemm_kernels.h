#pragma once
// The instruction sets' builds of the blocked GEMM (gemm_blocked.h), one source file each;
// gemm.cpp checks the arguments and chooses. Each requires m, n, k >= 1 and alpha != 0.
namespace rddp::cpu {

// Any CPU: the build's baseline instruction set.
void gemm_portable(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void gemm_portable(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha,
                   const double* a, int lda, const double* b, int ldb, double beta, double* c,
                   int ldc);

// x86-64 with AVX2, only where the build compiled it (RDDP_GEMM_AVX2).
void gemm_avx2(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void gemm_avx2(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha,
               const double* a, int lda, const double* b, int ldb, double beta, double* c,
               int ldc);

}  // namespace rddp::cpu
