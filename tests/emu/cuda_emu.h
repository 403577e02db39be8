#pragma once
// What a kernel source (kernels/*.cu) needs to compile as host C++ and run in the emulator. It
// is force-included (-include) ahead of the source, which rewrite_launches.cmake has copied with
// each `kernel<<<grid, block, shared, stream>>>(args)` turned into
//   kernel % ::emu::config("kernel", __FILE__, __LINE__, grid, block, shared, stream)
//          % ::emu::args(args)
// so that no argument list needs parsing. Under g++ the CUDA headers serve as host headers: they
// define dim3, uint3, the error codes and the bfloat16/half types with host conversions, and
// expand __global__, __device__ and __host__ to nothing. What they leave to nvcc is here: the
// built-in indices, __shared__, the barriers and the warp intrinsics the kernels use.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "stream_work.h"

namespace emu {

// Where the launch was written and how it was configured.
struct Config {
  const char* kernel;
  const char* file;
  int line;
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
};

inline Config config(const char* kernel, const char* file, int line, dim3 grid, dim3 block,
                     size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
  return {kernel, file, line, grid, block, shared_bytes, stream};
}

namespace detail {

struct ThreadPlace {
  uint3 thread_idx;
};
// The running fiber's threadIdx; the rest is the same for the whole block.
extern ThreadPlace* current_place;
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;

// Runs body(context) once per thread of the grid (scheduler.cpp); throws LaunchFault.
void run_grid(const Config& config, void (*body)(void*), void* context);
// Whether every pointer the kernel is handed lies in memory cudaMalloc gave (host_runtime.cpp).
void check_kernel_pointer(const Config& config, int argument, const void* pointer);

enum class BlockBarrier { sync, sync_or, sync_and, sync_count };
int block_barrier(BlockBarrier kind, int predicate, const char* file, int line);

enum class WarpOp { shuffle, sync, ballot };
// Every lane of `mask` arrives; each gets the value of lane `source` (shuffle), the ballot of
// the predicates in `value` (ballot) or nothing (sync).
uint64_t warp_collective(WarpOp op, const char* name, unsigned mask, uint64_t value, int source);
int current_lane();

template <typename T>
T shuffle(const char* name, unsigned mask, T value, int source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move <= 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_collective(WarpOp::shuffle, name, mask, bits, source);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

template <typename T>
void check_pointer_argument(const Config& config, int argument, const T& value) {
  if constexpr (std::is_pointer_v<T>)
    if (value != nullptr) check_kernel_pointer(config, argument, value);
}

template <typename Call>
void invoke(void* call) {
  (*static_cast<Call*>(call))();
}

}  // namespace detail

template <typename... Params>
struct Launch {
  void (*kernel)(Params...);
  Config config;
};

template <typename... Values>
struct Args {
  std::tuple<Values...> values;
};

template <typename... Params>
Launch<Params...> operator%(void (*kernel)(Params...), const Config& config) {
  return {kernel, config};
}

template <typename... Values>
Args<std::decay_t<Values>...> args(Values&&... values) {
  return {std::tuple<std::decay_t<Values>...>(std::forward<Values>(values)...)};
}

// Each thread calls the kernel with its own copies of the arguments, converted to the
// parameters' types as at a launch. The launch goes through the stream, so that a capture
// records it with the argument values of the moment, as a graph's kernel node keeps them.
template <typename... Params, typename... Values>
void operator%(const Launch<Params...>& launch, const Args<Values...>& arguments) {
  static_assert(sizeof...(Params) == sizeof...(Values), "a launch passes every parameter");
  std::apply(
      [&](const auto&... value) {
        int argument = 0;
        (detail::check_pointer_argument(launch.config, argument++, value), ...);
      },
      arguments.values);
  enqueue(launch.config.stream, [launch, arguments] {
    auto call = [&] { std::apply(launch.kernel, arguments.values); };
    detail::run_grid(launch.config, &detail::invoke<decltype(call)>, &call);
  });
}

}  // namespace emu

// ---- what nvcc would provide

// One OS thread runs a block's fibers and blocks run one after another, so a function-local
// static is shared by the threads of a block, as __shared__ memory is; each instantiation of a
// template has its own, as on the GPU. Unlike the GPU's, it keeps the previous block's values.
#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#define threadIdx (static_cast<const uint3&>(::emu::detail::current_place->thread_idx))
#define blockIdx (static_cast<const uint3&>(::emu::detail::block_idx))
#define blockDim (static_cast<const dim3&>(::emu::detail::block_dim))
#define gridDim (static_cast<const dim3&>(::emu::detail::grid_dim))

// Macros, so that each barrier knows where it was written: threads of a block that wait at
// different __syncthreads fail the launch (the CUDA rule; the hardware may let it pass).
#define __syncthreads() \
  ((void)::emu::detail::block_barrier(::emu::detail::BlockBarrier::sync, 0, __FILE__, __LINE__))
#define __syncthreads_or(predicate)                                                       \
  ::emu::detail::block_barrier(::emu::detail::BlockBarrier::sync_or, (predicate), __FILE__, \
                               __LINE__)
#define __syncthreads_and(predicate)                                                       \
  ::emu::detail::block_barrier(::emu::detail::BlockBarrier::sync_and, (predicate), __FILE__, \
                               __LINE__)
#define __syncthreads_count(predicate)                                                       \
  ::emu::detail::block_barrier(::emu::detail::BlockBarrier::sync_count, (predicate), __FILE__, \
                               __LINE__)

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::emu::detail::warp_collective(::emu::detail::WarpOp::sync, "__syncwarp", mask, 0, 0);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(::emu::detail::warp_collective(
      ::emu::detail::WarpOp::ballot, "__ballot_sync", mask, predicate != 0, 0));
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}

// Source lanes as PTX's shfl computes them: outside the lane's segment of `width` lanes a lane
// keeps its own value.
template <typename T>
T __shfl_sync(unsigned mask, T var, int source_lane, int width = 32) {
  const int lane = ::emu::detail::current_lane();
  const int source = (lane & ~(width - 1)) + (source_lane & (width - 1));
  return ::emu::detail::shuffle("__shfl_sync", mask, var, source);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::emu::detail::current_lane();
  const int source = lane + static_cast<int>(delta);
  const int last = (lane & ~(width - 1)) + width - 1;
  return ::emu::detail::shuffle("__shfl_down_sync", mask, var, source <= last ? source : lane);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::emu::detail::current_lane();
  const int source = lane - static_cast<int>(delta);
  const int first = lane & ~(width - 1);
  return ::emu::detail::shuffle("__shfl_up_sync", mask, var, source >= first ? source : lane);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  const int lane = ::emu::detail::current_lane();
  const int source = lane ^ lane_mask;
  const int last = (lane & ~(width - 1)) + width - 1;
  return ::emu::detail::shuffle("__shfl_xor_sync", mask, var, source <= last ? source : lane);
}

// nvcc's device min and max overloads (int, unsigned, long long, float, double), which host C++
// only has as std::min and std::max; unqualified calls from a kernel find these.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
