// Small kernels that exercise the emulator itself (test_emulator.cpp): right results from
// shared memory, barriers and each warp intrinsic, and the failures it must report rather than
// hang on or let pass. Rewritten and compiled like kernels/*.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_kernels.h"

namespace emu_probe {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// Sum of `in` over the block through a shared-memory tree: out[blockIdx.x] = the block's sum.
__global__ void block_sum_kernel(const int* in, int* out) {
  __shared__ int partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// For each lane: its value from __shfl_down_sync, __shfl_up_sync, __shfl_xor_sync and
// __shfl_sync (lane 3), and a ballot of the odd lanes, into out[5 * thread + i].
__global__ void warp_intrinsics_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int value = 100 + t;
  out[5 * t + 0] = __shfl_down_sync(kFull, value, 5);
  out[5 * t + 1] = __shfl_up_sync(kFull, value, 2);
  out[5 * t + 2] = __shfl_xor_sync(kFull, value, 16);
  out[5 * t + 3] = __shfl_sync(kFull, value, 3);
  out[5 * t + 4] = static_cast<int>(__ballot_sync(kFull, t % 2));
}

// Counts across the block: out[0] = how many threads have an even index; out[1] = whether any
// is 7 (through __syncthreads_count and __syncthreads_or).
__global__ void block_votes_kernel(int* out) {
  const int count = __syncthreads_count(threadIdx.x % 2 == 0);
  const int any = __syncthreads_or(threadIdx.x == 7);
  if (threadIdx.x == 0) {
    out[0] = count;
    out[1] = any;
  }
}

// The first threads exit early; the rest still meet at the barrier (exited threads no longer
// take part, as on the GPU).
__global__ void early_exit_kernel(int* out) {
  if (threadIdx.x < 32) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Faults: a barrier only half the block reaches, the other half at another one.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 64) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();
  }
}

// A shuffle over the full warp after lane 0 has returned.
__global__ void shuffle_after_exit_kernel(int* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_down_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

// Lane 0 waits at __syncwarp for lanes that wait at __syncthreads for lane 0: a hang.
__global__ void hang_kernel(int* out) {
  if (threadIdx.x == 0)
    __syncwarp();
  else
    __syncthreads();
  out[threadIdx.x] = 0;
}

// Writes one element past the end of `out` (count elements).
__global__ void write_past_end_kernel(int count, int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= count) out[i] = i;
}

struct alignas(16) Quad {
  float v[4];
};

// A 16-byte vector load through `in`, which the caller leaves 4-byte aligned.
__global__ void vector_load_kernel(const float* in, float* out) {
  out[0] = reinterpret_cast<const Quad*>(in)->v[0];
}

// out[t] = in[t - 1] (out[0] = in[0]) through shared memory with no barrier between the store
// and the load: a race that the forward order hides, since thread t - 1 has run by then.
__global__ void racy_neighbour_kernel(const int* in, int* out) {
  __shared__ int value[64];
  const unsigned t = threadIdx.x;
  value[t] = in[t];
  out[t] = value[t > 0 ? t - 1 : 0];
}

// Two block sums of 64 threads through one shared array, with the barrier after the first sum's
// loads left out: out[t] is the first sum as thread t saw it, out[64 + t] the second. Correct
// while the warps move in step; a warp that runs ahead stores its second partial where the other
// warp has yet to load its first.
__global__ void reused_partials_kernel(const int* in, int* out) {
  __shared__ int partial[2];
  const unsigned t = threadIdx.x, warp = t / 32;
  int v = in[t];
  for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) v += __shfl_xor_sync(kFull, v, lane_mask);
  if (t % 32 == 0) partial[warp] = v;
  __syncthreads();
  const int first = partial[0] + partial[1];
  int w = 2 * in[t];
  for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) w += __shfl_xor_sync(kFull, w, lane_mask);
  if (t % 32 == 0) partial[warp] = w;  // a __syncthreads() belongs before this store
  __syncthreads();
  out[t] = first;
  out[64 + t] = partial[0] + partial[1];
}

// Block b > 0 reads what block b - 1 wrote, one block a thread: blocks that depend on the order
// in which the GPU runs them.
__global__ void chained_blocks_kernel(int* out) {
  const unsigned b = blockIdx.x;
  out[b] = b == 0 ? 1 : out[b - 1] + 1;
}

}  // namespace

void block_sum(const int* in, int* out, int blocks) {
  block_sum_kernel<<<blocks, 256>>>(in, out);
}
void warp_intrinsics(int* out) { warp_intrinsics_kernel<<<1, 32>>>(out); }
void block_votes(int* out) { block_votes_kernel<<<1, 96>>>(out); }
void early_exit(int* out) { early_exit_kernel<<<1, 128>>>(out); }
void divergent_barrier(int* out) { divergent_barrier_kernel<<<1, 128>>>(out); }
void shuffle_after_exit(int* out) { shuffle_after_exit_kernel<<<1, 32>>>(out); }
void hang(int* out) { hang_kernel<<<1, 64>>>(out); }
void write_past_end(int count, int* out) {
  write_past_end_kernel<<<(count + 64) / 64, 64>>>(count, out);
}
void vector_load(const float* in, float* out) { vector_load_kernel<<<1, 1>>>(in, out); }
void racy_neighbour(const int* in, int* out) { racy_neighbour_kernel<<<1, 64>>>(in, out); }
void reused_partials(const int* in, int* out) { reused_partials_kernel<<<1, 64>>>(in, out); }
void chained_blocks(int* out, int blocks) { chained_blocks_kernel<<<blocks, 1>>>(out); }
void too_many_threads(int* out) { early_exit_kernel<<<1, 2048>>>(out); }

}  // namespace emu_probe
