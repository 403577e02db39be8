#pragma once
// Kernel maths is written once, in functions that nvcc compiles for both sides and a plain
// C++ compiler compiles for the host, so each CUDA kernel and its CPU twin share one formula.
#if defined(__CUDACC__)
#define RDDP_HD __host__ __device__ __forceinline__
#else
#define RDDP_HD inline
#endif
