#pragma once
// Kernel maths is written once, in functions that nvcc compiles for both sides and a plain
// C++ compiler compiles for the host, so each CUDA kernel and its CPU twin share one formula.
#include <math.h>

#if defined(__CUDACC__)
#define RDDP_HD __host__ __device__ __forceinline__
#else
#define RDDP_HD inline
#endif

// For a host-device template that calls a functor it is given: a lambda is implicitly constexpr,
// which nvcc counts as a host function, and would warn about calling it from device code even
// when the lambda was written inside a kernel. The template is only ever instantiated with
// functors of the side that calls it.
#if defined(__CUDACC__)
#define RDDP_HD_CALLS_FUNCTOR _Pragma("nv_exec_check_disable")
#else
#define RDDP_HD_CALLS_FUNCTOR
#endif

// Unrolls a loop of a compile-time count in device code (registers cannot be indexed at run
// time); host compilers, nvcc's host pass included, are left to decide.
#if defined(__CUDA_ARCH__)
#define RDDP_UNROLL _Pragma("unroll")
#else
#define RDDP_UNROLL
#endif

namespace rddp::hd {

// The C library's float and double functions by overload, so that templated maths calls the
// single-precision function (expf, not exp) when its compute type is float, on both sides.
RDDP_HD float exp_of(float x) { return ::expf(x); }
RDDP_HD double exp_of(double x) { return ::exp(x); }
RDDP_HD float log_of(float x) { return ::logf(x); }
RDDP_HD double log_of(double x) { return ::log(x); }
RDDP_HD float sqrt_of(float x) { return ::sqrtf(x); }
RDDP_HD double sqrt_of(double x) { return ::sqrt(x); }
RDDP_HD double pow_of(double x, double y) { return ::pow(x, y); }
// a * b rounded on its own, never fused into an addition that follows (nvcc contracts a product
// and a sum into one FMA where it can, and where it can may depend on code around it: a branch
// the loop was split on). Host compilers here do not contract.
#if defined(__CUDA_ARCH__)
__device__ inline float mul_rounded(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rounded(double a, double b) { return __dmul_rn(a, b); }
#else
inline float mul_rounded(float a, float b) { return a * b; }
inline double mul_rounded(double a, double b) { return a * b; }
#endif
// Neither Inf nor NaN.
RDDP_HD bool is_finite(float x) { return isfinite(x); }
RDDP_HD bool is_finite(double x) { return isfinite(x); }

}  // namespace rddp::hd
