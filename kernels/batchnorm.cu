// BatchNorm2d in training and evaluation mode and its backward, NCHW and NHWC, for float,
// bfloat16 and float16 activations, with the residual add and the ReLU fused into the forward
// and the ReLU's mask into the backward (API: cuda/batchnorm_kernels.h).
//
// Training forward, three launches: batch_moments_kernel leaves one Welford partial per channel
// and block in scratch; finish_moments_kernel folds each channel's partials (a warp a channel)
// into save_mean, save_invstd and the running statistics; normalize_kernel writes y. Backward,
// three more: grad_sums_kernel (sums of g and g * (x - mean) per channel and block),
// finish_grad_sums_kernel (dgamma, dbeta), data_grad_kernel (dx); both passes over the data read
// the ReLU's mask from its output or from bits the forward wrote, or recompute it from x
// (ReluMask). Which thread reads what is include/resnet_ddp/kernel_math/batchnorm_partition.h; every
// formula is include/resnet_ddp/kernel_math/batchnorm.h.
// Partials are folded in a fixed order and there are no atomics, so results repeat bit for bit.
//
// Values are widened to float on load and rounded once on store, as PyTorch's 16-bit kernels do.
// Loads and stores move `V` adjacent values at once (16 bytes where the shape and the pointers'
// alignment allow, 8 next, else one value).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "resnet_ddp/kernel_math/batchnorm.h"
#include "resnet_ddp/kernel_math/batchnorm_partition.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {
namespace {

using bn::kThreads;
using bn::kUnroll;
using bn::kWarp;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- V adjacent values, moved as one load or store of V * sizeof(T) bytes

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int V, typename T>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <int V, typename T>
__device__ __forceinline__ void widen(const Pack<T, V>& pack, float (&out)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = static_cast<float>(pack.v[k]);
}

template <int V, typename T>
__device__ __forceinline__ void store_rounded(T* p, const float (&values)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.v[k] = static_cast<T>(values[k]);
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}

// ---- where a thread is in the partition

// The thread's first channel: NHWC the first of its lane's V; NCHW the block's.
template <bool ChannelsLast, int V>
__device__ int first_channel(const bn::Partition& p) {
  if constexpr (ChannelsLast)
    return bn::nhwc_first_channel(p, static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x),
                                  V);
  else
    return static_cast<int>(blockIdx.x);
}

// Whether the thread has channels to read: only lanes past C in NHWC's last tile have none.
template <bool ChannelsLast>
__device__ bool has_channels(const bn::Partition& p, int first) {
  return !ChannelsLast || first < p.channels;
}

// Calls body(Loads) for each group of this thread's loads (batchnorm_partition.h's order).
template <bool ChannelsLast, int V, typename Body>
__device__ void walk(const bn::Partition& p, int first, Body&& body) {
  if (!has_channels<ChannelsLast>(p, first)) return;
  if constexpr (ChannelsLast)
    bn::walk_nhwc<kUnroll>(p, bn::block_shape(p, V), static_cast<int>(blockIdx.y),
                           static_cast<int>(threadIdx.y), first, body);
  else
    bn::walk_nchw<kUnroll>(p, V, first, static_cast<int>(blockIdx.y),
                           static_cast<int>(threadIdx.y), body);
}

// The values of a group of N loads, by slot and position (bn::slot_of, bn::position_of).
template <bool ChannelsLast, int V, int N>
using SlotValues = float[bn::kSlots<ChannelsLast, V>][bn::kPerSlot<ChannelsLast, V, N>];

// The N loads of a group, widened and sorted by slot.
template <bool ChannelsLast, int V, int N, typename T>
__device__ void gather(const T* base, const bn::Loads<N>& loads,
                       SlotValues<ChannelsLast, V, N>& values) {
  Pack<T, V> packs[N];
#pragma unroll
  for (int u = 0; u < N; ++u) packs[u] = load_pack<V>(base + loads.offset[u]);
#pragma unroll
  for (int u = 0; u < N; ++u) {
    float v[V];
    widen(packs[u], v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      values[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)] = v[k];
  }
}

template <bool ChannelsLast, int V, int N, typename T>
__device__ void scatter(T* base, const bn::Loads<N>& loads,
                        const SlotValues<ChannelsLast, V, N>& values) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = values[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)];
    store_rounded(base + loads.offset[u], v);
  }
}

// ---- the ReLU's mask as bits (ReluMask::of_bits; the layout: batchnorm_relu_bits_bytes)

// Each value rounded to T and widened back: what the store then writes, exactly (rounding a
// value of T is exact), so that the mask is taken from what y holds.
template <typename T, int Slots, int PerSlot>
__device__ void round_to_stored(float (&values)[Slots][PerSlot]) {
#pragma unroll
  for (int j = 0; j < Slots; ++j)
#pragma unroll
    for (int k = 0; k < PerSlot; ++k)
      values[j][k] = static_cast<float>(static_cast<T>(values[j][k]));
}

// A byte a load (the launchers load the shape's group at once where there are bits): bit k set
// where the load's value k, as stored, is not <= 0, bn::relu_masked's test.
template <bool ChannelsLast, int V, int N>
__device__ void store_relu_bits(uint8_t* bits, const bn::Loads<N>& loads,
                                const SlotValues<ChannelsLast, V, N>& stored) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    unsigned byte = 0;
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (!(stored[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)] <=
            0.0f))
        byte |= 1u << k;
    bits[loads.offset[u] / V] = static_cast<uint8_t>(byte);
  }
}

// g set to 0 where the load's byte of bits says the forward's output was <= 0, as
// bn::relu_masked does.
template <bool ChannelsLast, int V, int N>
__device__ void mask_by_bits(const uint8_t* bits, const bn::Loads<N>& loads,
                             SlotValues<ChannelsLast, V, N>& g) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const unsigned byte = bits[loads.offset[u] / V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float& value = g[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)];
      value = (byte >> k) & 1u ? value : 0.0f;
    }
  }
}

// The thread's (lane, row) in the block's tree reductions, which merge rows and keep lanes (each
// lane its own channels) apart. Blocks are lanes x rows (bn::block_shape); NCHW blocks are one
// lane of kThreads rows, so that threadIdx.y numbers their threads in warp order there too.
struct TreePlace {
  int lane, row, lanes, rows;
};

__device__ TreePlace tree_place() {
  return {static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y),
          static_cast<int>(blockDim.x), static_cast<int>(blockDim.y)};
}

// Row 0 of each lane ends with the combination of the lane's column: at each level, rows
// [half, 2 half) store their state in shared memory (store(me)), and rows [0, half) absorb what
// row r + half stored (absorb(other)). rows is a power of two. Every thread of the block must
// call it.
template <typename Store, typename Absorb>
__device__ __forceinline__ void block_tree(const TreePlace& at, const Store& store,
                                           const Absorb& absorb) {
  const int me = at.row * at.lanes + at.lane;
  for (int half = at.rows / 2; half > 0; half /= 2) {
    if (at.row >= half && at.row < 2 * half) store(me);
    __syncthreads();
    if (at.row < half) absorb(me + half * at.lanes);
    __syncthreads();
  }
}

template <int Slots>
__device__ void block_merge(bn::SlotMoments<float, Slots>& mine, const TreePlace& at) {
  __shared__ float counts[kThreads];
  __shared__ float means[Slots][kThreads];
  __shared__ float m2s[Slots][kThreads];
  block_tree(
      at,
      [&](int me) {
        counts[me] = mine.count;
#pragma unroll
        for (int j = 0; j < Slots; ++j) {
          means[j][me] = mine.mean[j];
          m2s[j][me] = mine.m2[j];
        }
      },
      [&](int other) {
        bn::SlotMoments<float, Slots> theirs;
        theirs.count = counts[other];
#pragma unroll
        for (int j = 0; j < Slots; ++j) {
          theirs.mean[j] = means[j][other];
          theirs.m2[j] = m2s[j][other];
        }
        bn::merge_slots(mine, theirs);
      });
}

template <int Slots>
__device__ void block_sum(bn::SlotSums<float, Slots>& mine, const TreePlace& at) {
  __shared__ float gs[Slots][kThreads];
  __shared__ float g_xmus[Slots][kThreads];
  block_tree(
      at,
      [&](int me) {
#pragma unroll
        for (int j = 0; j < Slots; ++j) {
          gs[j][me] = mine.g[j];
          g_xmus[j][me] = mine.g_xmu[j];
        }
      },
      [&](int other) {
        bn::SlotSums<float, Slots> theirs;
#pragma unroll
        for (int j = 0; j < Slots; ++j) {
          theirs.g[j] = gs[j][other];
          theirs.g_xmu[j] = g_xmus[j][other];
        }
        bn::add_sums(mine, theirs);
      });
}

// ---- training forward

template <typename T, int V, bool ChannelsLast>
__global__ void __launch_bounds__(kThreads)
    batch_moments_kernel(bn::Partition p, const T* __restrict__ x, float* __restrict__ partials) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  const int first = first_channel<ChannelsLast, V>(p);
  auto moments = bn::no_moments<float, Slots>();
  walk<ChannelsLast, V>(p, first, [&](const auto& loads) {
    constexpr int N = std::decay_t<decltype(loads)>::kCount;
    float values[Slots][bn::kPerSlot<ChannelsLast, V, N>];
    gather<ChannelsLast, V>(x, loads, values);
    bn::add_group(moments, values);
  });
  const TreePlace at = tree_place();
  block_merge(moments, at);
  if (at.row != 0 || !has_channels<ChannelsLast>(p, first)) return;
  const int64_t stride = bn::partials_per_array(p);
#pragma unroll
  for (int j = 0; j < Slots; ++j) {
    const int64_t i = bn::partial_index(p, first + j, static_cast<int>(blockIdx.y));
    partials[i] = moments.mean[j];
    partials[stride + i] = moments.m2[j];
    partials[2 * stride + i] = moments.count;
  }
}

// A warp a channel: lane l folds partials l, l + 32, ... in order, then the lanes merge down a
// fixed tree (lane l absorbs lane l + offset), so lane 0 holds the channel's moments.
__global__ void __launch_bounds__(kThreads)
    finish_moments_kernel(bn::Partition p, const float* __restrict__ partials, float count,
                          float eps, float momentum, float* __restrict__ running_mean,
                          float* __restrict__ running_var, float* __restrict__ save_mean,
                          float* __restrict__ save_invstd) {
  const int channel = static_cast<int>(blockIdx.x) * (kThreads / kWarp) +
                      static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (channel >= p.channels) return;  // the whole warp: no shuffle is left waiting
  const int64_t stride = bn::partials_per_array(p);
  bn::Moments<float> total{0.0f, 0.0f, 0.0f};
  for (int split = lane; split < p.splits; split += kWarp) {
    const int64_t i = bn::partial_index(p, channel, split);
    total = bn::merged(total, bn::Moments<float>{partials[2 * stride + i], partials[i],
                                                 partials[stride + i]});
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const bn::Moments<float> other{__shfl_down_sync(kFullMask, total.count, offset),
                                   __shfl_down_sync(kFullMask, total.mean, offset),
                                   __shfl_down_sync(kFullMask, total.m2, offset)};
    if (lane < offset) total = bn::merged(total, other);
  }
  if (lane != 0) return;
  // `count` is the exact M, not the float sum of the partials' counts (equal below 2^24 values).
  const bn::ChannelStats<float> s = bn::channel_stats(
      count, total.mean, total.m2, eps, momentum,
      running_mean != nullptr ? running_mean[channel] : 0.0f,
      running_var != nullptr ? running_var[channel] : 0.0f);
  save_mean[channel] = s.mean;
  save_invstd[channel] = s.invstd;
  if (running_mean != nullptr) running_mean[channel] = s.running_mean;
  if (running_var != nullptr) running_var[channel] = s.running_var;
}

// y = act((x - mean) * gamma * invstd + beta [+ residual]). invstd is `spread` itself (training:
// save_invstd), or 1 / sqrt(spread + eps) when spread_is_variance (evaluation: running_var). No
// __restrict__ on x, residual and y: y may alias one of them; each element is read by the thread
// that writes it, before it writes it. Residual (residual is not null) is a template parameter
// for the registers the residual's values take (96 rather than 78 a thread in bfloat16 NHWC, by
// ptxas): without, three blocks of 256 threads fit an SM, not two. relu_bits, when not null,
// receives the ReLU's mask (store_relu_bits; V is then the shape's group).
template <typename T, int V, bool ChannelsLast, bool Residual>
__global__ void __launch_bounds__(kThreads)
    normalize_kernel(bn::Partition p, const T* x, const T* residual, bool relu, T* y,
                     uint8_t* __restrict__ relu_bits, const float* __restrict__ mean,
                     const float* __restrict__ spread,
                     bool spread_is_variance, float eps, const float* __restrict__ gamma,
                     const float* __restrict__ beta) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  const int first = first_channel<ChannelsLast, V>(p);
  if (!has_channels<ChannelsLast>(p, first)) return;  // no block-wide step follows
  bn::Normalize<float> coefficients[Slots];
#pragma unroll
  for (int j = 0; j < Slots; ++j) {
    const int c = first + j;
    const float invstd = spread_is_variance ? bn::invstd_of(spread[c], eps) : spread[c];
    coefficients[j] = bn::make_normalize(mean[c], invstd, gamma[c], beta[c]);
  }
  walk<ChannelsLast, V>(p, first, [&](const auto& loads) {
    constexpr int N = std::decay_t<decltype(loads)>::kCount;
    constexpr int PerSlot = bn::kPerSlot<ChannelsLast, V, N>;
    float values[Slots][PerSlot], residuals[Slots][PerSlot];
    gather<ChannelsLast, V>(x, loads, values);
    if constexpr (Residual) gather<ChannelsLast, V>(residual, loads, residuals);
#pragma unroll
    for (int j = 0; j < Slots; ++j)
#pragma unroll
      for (int k = 0; k < PerSlot; ++k)
        values[j][k] = bn::forward_output(coefficients[j], values[j][k], Residual,
                                          Residual ? residuals[j][k] : 0.0f, relu);
    if (relu_bits != nullptr) {
      round_to_stored<T>(values);
      store_relu_bits<ChannelsLast, V>(relu_bits, loads, values);
    }
    scatter<ChannelsLast, V>(y, loads, values);
  });
}

// ---- backward

// g = dy, masked by the ReLU's output or by its bits when there are any (at most one of the
// two).
template <bool ChannelsLast, int V, int N, typename T>
__device__ void gather_grad(const T* dy, const T* relu_output, const uint8_t* relu_bits,
                            const bn::Loads<N>& loads, SlotValues<ChannelsLast, V, N>& g) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  constexpr int PerSlot = bn::kPerSlot<ChannelsLast, V, N>;
  gather<ChannelsLast, V>(dy, loads, g);
  if (relu_bits != nullptr) mask_by_bits<ChannelsLast, V>(relu_bits, loads, g);
  if (relu_output == nullptr) return;
  SlotValues<ChannelsLast, V, N> outputs;
  gather<ChannelsLast, V>(relu_output, loads, outputs);
#pragma unroll
  for (int j = 0; j < Slots; ++j)
#pragma unroll
    for (int k = 0; k < PerSlot; ++k) g[j][k] = bn::relu_masked(g[j][k], outputs[j][k]);
}

// ReluMask::recomputed: g masked where the forward's output, recomputed from x as
// normalize_kernel computes it without a residual and rounded to T as it stores it, is <= 0.
// The same function of the same floats, so the same mask as reading that output back.
template <typename T, int Slots, int PerSlot>
__device__ void mask_by_recomputed_output(float (&g)[Slots][PerSlot],
                                          const float (&x)[Slots][PerSlot],
                                          const bn::Normalize<float> (&forward)[Slots]) {
#pragma unroll
  for (int j = 0; j < Slots; ++j)
#pragma unroll
    for (int k = 0; k < PerSlot; ++k)
      g[j][k] = bn::relu_masked(g[j][k], bn::stored_relu_output<T>(forward[j], x[j][k]));
}

// The forward's coefficients of channels first, first + 1, ..., as normalize_kernel made them
// in training.
template <int Slots>
__device__ void forward_coefficients(int first, const float* save_mean, const float* save_invstd,
                                     const float* gamma, const float* beta,
                                     bn::Normalize<float> (&out)[Slots]) {
#pragma unroll
  for (int j = 0; j < Slots; ++j) {
    const int c = first + j;
    out[j] = bn::make_normalize(save_mean[c], save_invstd[c], gamma[c], beta[c]);
  }
}

// No __restrict__ on dy and masked_dy, which may alias. Recompute: the ReLU's mask is
// recomputed from x with mask_beta (ReluMask::beta). A template parameter, not a branch: the
// forward's coefficients it holds cost every kernel registers otherwise (164 rather than 100 a
// thread in bfloat16 NHWC, by ptxas), so that one block of 256 threads fitted an SM, not two.
template <typename T, int V, bool ChannelsLast, bool Recompute>
__global__ void __launch_bounds__(kThreads)
    grad_sums_kernel(bn::Partition p, const T* __restrict__ x, const T* dy,
                     const T* relu_output, const uint8_t* relu_bits, T* masked_dy,
                     const float* __restrict__ save_mean,
                     const float* __restrict__ save_invstd, const float* __restrict__ gamma,
                     const float* __restrict__ mask_beta, float* __restrict__ partials) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  const int first = first_channel<ChannelsLast, V>(p);
  const bool owns_channels = has_channels<ChannelsLast>(p, first);
  float mean[Slots];
#pragma unroll
  for (int j = 0; j < Slots; ++j) mean[j] = owns_channels ? save_mean[first + j] : 0.0f;
  bn::Normalize<float> forward[Slots] = {};
  if constexpr (Recompute) {
    if (owns_channels)
      forward_coefficients(first, save_mean, save_invstd, gamma, mask_beta, forward);
  }
  auto sums = bn::no_sums<float, Slots>();
  walk<ChannelsLast, V>(p, first, [&](const auto& loads) {
    constexpr int N = std::decay_t<decltype(loads)>::kCount;
    constexpr int PerSlot = bn::kPerSlot<ChannelsLast, V, N>;
    float g[Slots][PerSlot], values[Slots][PerSlot];
    gather_grad<ChannelsLast, V>(dy, relu_output, relu_bits, loads, g);
    gather<ChannelsLast, V>(x, loads, values);
    if constexpr (Recompute) mask_by_recomputed_output<T>(g, values, forward);
    bn::add_grad_group(sums, g, values, mean);
    if (masked_dy != nullptr) scatter<ChannelsLast, V>(masked_dy, loads, g);
  });
  const TreePlace at = tree_place();
  block_sum(sums, at);
  if (at.row != 0 || !has_channels<ChannelsLast>(p, first)) return;
  const int64_t stride = bn::partials_per_array(p);
#pragma unroll
  for (int j = 0; j < Slots; ++j) {
    const int64_t i = bn::partial_index(p, first + j, static_cast<int>(blockIdx.y));
    partials[i] = sums.g[j];
    partials[stride + i] = sums.g_xmu[j];
  }
}

// A warp a channel, folding like finish_moments_kernel.
__global__ void __launch_bounds__(kThreads)
    finish_grad_sums_kernel(bn::Partition p, const float* __restrict__ partials,
                            const float* __restrict__ save_invstd, float* __restrict__ dgamma,
                            float* __restrict__ dbeta) {
  const int channel = static_cast<int>(blockIdx.x) * (kThreads / kWarp) +
                      static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (channel >= p.channels) return;
  const int64_t stride = bn::partials_per_array(p);
  float sum_g = 0.0f, sum_g_xmu = 0.0f;
  for (int split = lane; split < p.splits; split += kWarp) {
    const int64_t i = bn::partial_index(p, channel, split);
    sum_g += partials[i];
    sum_g_xmu += partials[stride + i];
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float other_g = __shfl_down_sync(kFullMask, sum_g, offset);
    const float other_g_xmu = __shfl_down_sync(kFullMask, sum_g_xmu, offset);
    if (lane < offset) {
      sum_g += other_g;
      sum_g_xmu += other_g_xmu;
    }
  }
  if (lane != 0) return;
  const bn::ParamGrads<float> grads = bn::param_grads(sum_g, sum_g_xmu, save_invstd[channel]);
  dgamma[channel] = grads.dgamma;
  dbeta[channel] = grads.dbeta;
}

// No __restrict__ on dy, relu_output and dx: dx may alias dy. Recompute and mask_beta as
// grad_sums_kernel's.
template <typename T, int V, bool ChannelsLast, bool Recompute>
__global__ void __launch_bounds__(kThreads)
    data_grad_kernel(bn::Partition p, const T* x, const T* dy, const T* relu_output,
                     const uint8_t* relu_bits, T* dx,
                     const float* __restrict__ gamma, const float* __restrict__ save_mean,
                     const float* __restrict__ save_invstd, const float* __restrict__ dgamma,
                     const float* __restrict__ dbeta, const float* __restrict__ mask_beta,
                     float inv_count) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  const int first = first_channel<ChannelsLast, V>(p);
  if (!has_channels<ChannelsLast>(p, first)) return;
  bn::DataGrad<float> coefficients[Slots];
#pragma unroll
  for (int j = 0; j < Slots; ++j) {
    const int c = first + j;
    coefficients[j] = bn::make_data_grad(save_mean[c], save_invstd[c], gamma[c], dgamma[c],
                                         dbeta[c], inv_count);
  }
  bn::Normalize<float> forward[Slots] = {};
  if constexpr (Recompute)
    forward_coefficients(first, save_mean, save_invstd, gamma, mask_beta, forward);
  walk<ChannelsLast, V>(p, first, [&](const auto& loads) {
    constexpr int N = std::decay_t<decltype(loads)>::kCount;
    constexpr int PerSlot = bn::kPerSlot<ChannelsLast, V, N>;
    float g[Slots][PerSlot], values[Slots][PerSlot];
    gather_grad<ChannelsLast, V>(dy, relu_output, relu_bits, loads, g);
    gather<ChannelsLast, V>(x, loads, values);
    if constexpr (Recompute) mask_by_recomputed_output<T>(g, values, forward);
#pragma unroll
    for (int j = 0; j < Slots; ++j)
#pragma unroll
      for (int k = 0; k < PerSlot; ++k)
        values[j][k] = bn::data_grad(coefficients[j], g[j][k], values[j][k]);
    scatter<ChannelsLast, V>(dx, loads, values);
  });
}

// ---- host side

bn::Partition partition_of(const BatchNormShape& s) {
  if (s.batch < 1 || s.channels < 1 || s.height < 1 || s.width < 1)
    fail("batchnorm: shape ", s.batch, "x", s.channels, "x", s.height, "x", s.width,
         " has an empty dimension; every dimension must be >= 1");
  return bn::make_partition(s.batch, s.channels, s.height, s.width,
                            s.format == MemoryFormat::nhwc);
}

void check_scratch(const BatchNormShape& s, const void* scratch, size_t scratch_bytes) {
  const size_t needed = batchnorm_scratch_bytes(s);
  if (scratch == nullptr || scratch_bytes < needed ||
      reinterpret_cast<uintptr_t>(scratch) % alignof(float) != 0)
    fail("internal error: batchnorm of ", s.batch, "x", s.channels, "x", s.height, "x", s.width,
         " was given ", scratch_bytes, " bytes of scratch at ", scratch, "; it needs ", needed,
         " bytes, 4-byte aligned; please report this");
}

// The widest load the shape and every given pointer allow, among the widths instantiated: 16
// bytes, 8 bytes, one value.
template <typename T>
int vector_width(const bn::Partition& p, std::initializer_list<const void*> pointers) {
  constexpr int kWidest = 16 / static_cast<int>(sizeof(T));
  for (int vector = bn::widest_vector(p, kWidest); vector > 1; vector /= 2) {
    if (vector != kWidest && vector != kWidest / 2) continue;
    bool aligned = true;
    for (const void* pointer : pointers)
      aligned = aligned && reinterpret_cast<uintptr_t>(pointer) % (vector * sizeof(T)) == 0;
    if (aligned) return vector;
  }
  return 1;
}

// Calls launch(std::integral_constant<int, V>, std::bool_constant<ChannelsLast>).
template <typename T, typename Launch>
void dispatch(const bn::Partition& p, int vector, Launch&& launch) {
  constexpr int kWidest = 16 / static_cast<int>(sizeof(T));
  auto with_layout = [&](auto v) {
    if (p.channels_last)
      launch(v, std::true_type{});
    else
      launch(v, std::false_type{});
  };
  if (vector == kWidest)
    with_layout(std::integral_constant<int, kWidest>{});
  else if (vector == kWidest / 2)
    with_layout(std::integral_constant<int, kWidest / 2>{});
  else
    with_layout(std::integral_constant<int, 1>{});
}

dim3 grid_of(const bn::Partition& p) {
  return dim3(static_cast<unsigned>(p.channel_groups), static_cast<unsigned>(p.splits));
}

dim3 block_of(const bn::Partition& p, int vector) {
  const bn::BlockShape shape = bn::block_shape(p, vector);
  return dim3(static_cast<unsigned>(shape.lanes), static_cast<unsigned>(shape.rows));
}

// The per-channel kernels: a warp a channel.
unsigned channel_warp_blocks(const bn::Partition& p) {
  constexpr int kWarpsPerBlock = kThreads / kWarp;
  return static_cast<unsigned>((p.channels + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// The output pass of training (with the batch's statistics) and of evaluation (with the
// running ones): the kernel instance is chosen by whether a residual is added.
template <typename T, int V, bool ChannelsLast>
void launch_normalize(const bn::Partition& p, const T* x, const T* residual, bool relu, T* y,
                      uint8_t* relu_bits, const float* mean, const float* spread,
                      bool spread_is_variance, const float* gamma, const float* beta,
                      cudaStream_t stream) {
  const auto normalize = residual != nullptr ? normalize_kernel<T, V, ChannelsLast, true>
                                             : normalize_kernel<T, V, ChannelsLast, false>;
  normalize<<<grid_of(p), block_of(p, V), 0, stream>>>(p, x, residual, relu, y, relu_bits, mean,
                                                       spread, spread_is_variance,
                                                       kBatchNormEpsilon, gamma, beta);
  RDDP_CUDA_CHECK_LAUNCH("normalize_kernel");
}

// The values of one byte of the ReLU's bits: the widest load the shape allows.
template <typename T>
int relu_bits_group(const bn::Partition& p) {
  return vector_width<T>(p, {});
}

}  // namespace

template <typename T>
size_t batchnorm_relu_bits_bytes(const BatchNormShape& shape) {
  const bn::Partition p = partition_of(shape);
  const int64_t values = p.per_channel * p.channels;
  return static_cast<size_t>(values / relu_bits_group<T>(p));
}

size_t batchnorm_scratch_bytes(const BatchNormShape& shape) {
  const bn::Partition p = partition_of(shape);
  return static_cast<size_t>(bn::kPartialArrays) * static_cast<size_t>(bn::partials_per_array(p)) *
         sizeof(float);
}

void check_batchnorm_trainable(const BatchNormShape& s) {
  if (static_cast<long long>(s.batch) * s.height * s.width == 1)
    fail("batchnorm: batch * height * width is 1 at this layer (input ", s.batch, "x", s.channels,
         "x", s.height, "x", s.width, "), so a channel has a single value and no variance ",
         "(PyTorch: \"Expected more than 1 value per channel when training\"); use a batch of ",
         "at least 2 or a larger input image");
}

template <typename T>
void batchnorm_forward_train(const BatchNormShape& shape, const T* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var,
                             float* save_mean, float* save_invstd, const T* residual, bool relu,
                             T* y, void* scratch, size_t scratch_bytes, cudaStream_t stream,
                             uint8_t* relu_bits) {
  const bn::Partition p = partition_of(shape);
  check_batchnorm_trainable(shape);
  check_scratch(shape, scratch, scratch_bytes);
  float* partials = static_cast<float*>(scratch);
  const int vector = vector_width<T>(p, {x, y, residual});
  if (relu_bits != nullptr && (!relu || y == nullptr || vector != relu_bits_group<T>(p)))
    fail("internal error: batchnorm_forward_train was asked for the ReLU's bits ",
         !relu || y == nullptr ? "without a ReLU or without an output"
                               : "with x, y or residual not 16-byte aligned",
         " (", shape.batch, "x", shape.channels, "x", shape.height, "x", shape.width,
         "); please report this");
  dispatch<T>(p, vector, [&](auto v, auto channels_last) {
    constexpr int V = decltype(v)::value;
    constexpr bool kChannelsLast = decltype(channels_last)::value;
    batch_moments_kernel<T, V, kChannelsLast>
        <<<grid_of(p), block_of(p, V), 0, stream>>>(p, x, partials);
    RDDP_CUDA_CHECK_LAUNCH("batch_moments_kernel");
    finish_moments_kernel<<<channel_warp_blocks(p), kThreads, 0, stream>>>(
        p, partials, static_cast<float>(p.per_channel), kBatchNormEpsilon, kBatchNormMomentum,
        running_mean, running_var, save_mean, save_invstd);
    RDDP_CUDA_CHECK_LAUNCH("finish_moments_kernel");
    if (y == nullptr) return;  // the statistics only
    launch_normalize<T, V, kChannelsLast>(p, x, residual, relu, y, relu_bits, save_mean,
                                          save_invstd, /*spread_is_variance=*/false, gamma, beta,
                                          stream);
  });
}

template <typename T>
void batchnorm_forward_eval(const BatchNormShape& shape, const T* x, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var,
                            const T* residual, bool relu, T* y, cudaStream_t stream) {
  const bn::Partition p = partition_of(shape);
  const int vector = vector_width<T>(p, {x, y, residual});
  dispatch<T>(p, vector, [&](auto v, auto channels_last) {
    constexpr int V = decltype(v)::value;
    constexpr bool kChannelsLast = decltype(channels_last)::value;
    launch_normalize<T, V, kChannelsLast>(p, x, residual, relu, y, /*relu_bits=*/nullptr,
                                          running_mean, running_var,
                                          /*spread_is_variance=*/true, gamma, beta, stream);
  });
}

template <typename T>
void batchnorm_backward(const BatchNormShape& shape, const T* x, const T* dy, ReluMask<T> relu,
                        const float* gamma, const float* save_mean, const float* save_invstd,
                        T* dx, float* dgamma, float* dbeta, void* scratch, size_t scratch_bytes,
                        cudaStream_t stream, T* masked_dy) {
  const bn::Partition p = partition_of(shape);
  check_batchnorm_trainable(shape);
  check_scratch(shape, scratch, scratch_bytes);
  if (masked_dy != nullptr && masked_dy == dx)
    fail("internal error: batchnorm_backward's masked_dy may not alias dx; please report this");
  if ((relu.output != nullptr) + (relu.beta != nullptr) + (relu.bits != nullptr) > 1)
    fail("internal error: batchnorm_backward was given more than one of the ReLU's output, its ",
         "bits and a beta to recompute it from; please report this");
  float* partials = static_cast<float*>(scratch);
  const T* relu_output = relu.output;
  const int vector = vector_width<T>(p, {x, dy, relu_output, dx, masked_dy});
  // Each load reads its own byte of bits: the forward's loads, the shape's widest.
  if (relu.bits != nullptr && vector != relu_bits_group<T>(p))
    fail("internal error: batchnorm_backward was given the ReLU's bits with x, dy, dx or ",
         "masked_dy not 16-byte aligned (", shape.batch, "x", shape.channels, "x", shape.height,
         "x", shape.width, "); please report this");
  // Masked in place by grad_sums_kernel, dy needs no second mask: masking is idempotent and the
  // stored value is the widened one rounded back, exactly, so leaving out the mask changes no
  // bit.
  const bool dy_is_masked = masked_dy != nullptr && masked_dy == dy && relu.any();
  // 1 / M rounded once from the exact quotient, as the twin's n_inv.
  const float inv_count = static_cast<float>(1.0 / static_cast<double>(p.per_channel));
  // The data gradient recomputes the mask only where grad_sums_kernel did not mask dy in place.
  const bool sums_recompute = relu.beta != nullptr;
  const bool data_recompute = sums_recompute && !dy_is_masked;
  dispatch<T>(p, vector, [&](auto v, auto channels_last) {
    constexpr int V = decltype(v)::value;
    constexpr bool kChannelsLast = decltype(channels_last)::value;
    const auto sums = sums_recompute ? grad_sums_kernel<T, V, kChannelsLast, true>
                                     : grad_sums_kernel<T, V, kChannelsLast, false>;
    sums<<<grid_of(p), block_of(p, V), 0, stream>>>(p, x, dy, relu_output, relu.bits, masked_dy,
                                                     save_mean, save_invstd, gamma, relu.beta,
                                                     partials);
    RDDP_CUDA_CHECK_LAUNCH("grad_sums_kernel");
    finish_grad_sums_kernel<<<channel_warp_blocks(p), kThreads, 0, stream>>>(
        p, partials, save_invstd, dgamma, dbeta);
    RDDP_CUDA_CHECK_LAUNCH("finish_grad_sums_kernel");
    const auto data = data_recompute ? data_grad_kernel<T, V, kChannelsLast, true>
                                     : data_grad_kernel<T, V, kChannelsLast, false>;
    data<<<grid_of(p), block_of(p, V), 0, stream>>>(
        p, x, dy, dy_is_masked ? nullptr : relu_output, dy_is_masked ? nullptr : relu.bits, dx,
        gamma, save_mean, save_invstd, dgamma, dbeta, data_recompute ? relu.beta : nullptr,
        inv_count);
    RDDP_CUDA_CHECK_LAUNCH("data_grad_kernel");
  });
}

#define RDDP_INSTANTIATE_BATCHNORM(T)                                                            \
  template void batchnorm_forward_train<T>(const BatchNormShape&, const T*, const float*,       \
                                           const float*, float*, float*, float*, float*,        \
                                           const T*, bool, T*, void*, size_t, cudaStream_t,     \
                                           uint8_t*);                                           \
  template size_t batchnorm_relu_bits_bytes<T>(const BatchNormShape&);                          \
  template void batchnorm_forward_eval<T>(const BatchNormShape&, const T*, const float*,        \
                                          const float*, const float*, const float*, const T*,   \
                                          bool, T*, cudaStream_t);                              \
  template void batchnorm_backward<T>(const BatchNormShape&, const T*, const T*, ReluMask<T>,  \
                                      const float*, const float*, const float*, T*, float*,     \
                                      float*, void*, size_t, cudaStream_t, T*);
RDDP_INSTANTIATE_BATCHNORM(float)
RDDP_INSTANTIATE_BATCHNORM(__nv_bfloat16)
RDDP_INSTANTIATE_BATCHNORM(__half)
#undef RDDP_INSTANTIATE_BATCHNORM

}  // namespace rddp::cuda
