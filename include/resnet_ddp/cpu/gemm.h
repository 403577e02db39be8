#pragma once
// Row-major single-node GEMM for the CPU layers:
//   C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C
// op(X) is X or its transpose; lda/ldb/ldc are row strides of the matrices as stored.
// With beta == 0, C is not read (it may hold garbage or NaN); with k == 0 or alpha == 0, A and
// B are not read.
// Runs on the OpenMP threads (on the calling thread alone inside a parallel region). Every
// element of C is summed in the same order whatever the number of threads and whichever kernel
// runs, so results are bitwise reproducible from one to many threads and from one CPU to
// another.
namespace rddp::cpu {

// The instruction sets the GEMM is built for: `avx2` where the build targets x86-64 (compiled
// with -mavx2, run only where the CPU has it), `portable` everywhere.
enum class GemmKernel { portable, avx2 };

const char* to_string(GemmKernel kernel);
// Whether this build holds the kernel and this CPU can run it.
bool gemm_kernel_available(GemmKernel kernel);
// The kernel gemm() runs: the widest available.
GemmKernel gemm_kernel();

template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

// gemm() on a chosen kernel, which must be available (for tests and benchmarks).
template <typename T>
void gemm_using(GemmKernel kernel, bool transpose_a, bool transpose_b, int m, int n, int k,
                T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc);

}  // namespace rddp::cpu
