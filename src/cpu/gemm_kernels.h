#pragma once
// The instruction sets' builds of the blocked GEMM (gemm_blocked.h), one source file each, as
// tables of its float and double instances; gemm.cpp checks the arguments and chooses a table.
// Each function requires m, n, k >= 1 and alpha != 0.
#include <type_traits>

namespace rddp::cpu {

template <typename T>
using GemmFunction = void (*)(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha,
                              const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc);

struct GemmFunctions {
  GemmFunction<float> f32;
  GemmFunction<double> f64;

  template <typename T>
  GemmFunction<T> of() const {
    if constexpr (std::is_same_v<T, float>) return f32;
    else return f64;
  }
};

// Any CPU: the build's baseline instruction set (gemm_portable.cpp).
extern const GemmFunctions kPortableGemm;
// x86-64 with AVX2, only where the build compiled it (RDDP_GEMM_AVX2; gemm_avx2.cpp).
extern const GemmFunctions kAvx2Gemm;

}  // namespace rddp::cpu
