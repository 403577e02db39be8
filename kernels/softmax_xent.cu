// Fused softmax + cross-entropy: loss, gradient and top-1 and top-5 counts of a batch of logits
// in one kernel, then a second, tiny one that reduces the per-row results in a fixed order. The
// per-element maths is include/resnet_ddp/kernel_math/softmax_xent.h, shared with src/cpu/softmax_xent.cpp.
#include <cuda_runtime.h>

#include <cmath>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/kernel_math/softmax_xent.h"

namespace rddp::cuda {
namespace {

using Compute = float;
constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Up to this many classes a row is one warp's work: at most 8 logits a lane, no shared memory
// and no block barriers. A wider row gets a whole block, so that one long row is not one
// warp's chain of dependent loads (and a batch of 1 still fills more than one warp).
constexpr int kWarpPerRowMaxClasses = 256;

__device__ xent::RowMax<Compute> shuffle_xor(const xent::RowMax<Compute>& v, int lane_mask) {
  return {__shfl_xor_sync(kFullMask, v.value, lane_mask),
          __shfl_xor_sync(kFullMask, v.index, lane_mask)};
}

__device__ xent::RowSums<Compute> shuffle_xor(const xent::RowSums<Compute>& v, int lane_mask) {
  return {__shfl_xor_sync(kFullMask, v.exp_sum, lane_mask),
          __shfl_xor_sync(kFullMask, v.shifted_sum, lane_mask)};
}

__device__ xent::LabelRank shuffle_xor(const xent::LabelRank& v, int lane_mask) {
  return {__shfl_xor_sync(kFullMask, v.ahead, lane_mask)};
}

// Butterfly reduction: every lane ends with the same bits, because each step combines the same
// two values on both partner lanes and the combines are commutative.
template <typename V>
__device__ V warp_reduce(V v) {
  for (int lane_mask = kWarp / 2; lane_mask > 0; lane_mask /= 2)
    v = xent::combine(v, shuffle_xor(v, lane_mask));
  return v;
}

template <typename V>
__device__ V block_reduce(V v) {
  __shared__ V partials[kThreads / kWarp];
  v = warp_reduce(v);
  if (threadIdx.x % kWarp == 0) partials[threadIdx.x / kWarp] = v;
  __syncthreads();
  // Every thread folds the warps' partials in the same order, so all agree on the result.
  V total = partials[0];
  for (int warp = 1; warp < kThreads / kWarp; ++warp) total = xent::combine(total, partials[warp]);
  __syncthreads();  // the next reduction of this type reuses `partials`
  return total;
}

// Which threads share a row, and how they reduce. Both launch kThreads threads a block.
struct WarpPerRow {
  static constexpr int kRowsPerBlock = kThreads / kWarp;
  static constexpr int kWidth = kWarp;
  __device__ static int row() { return blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; }
  __device__ static int lane() { return threadIdx.x % kWarp; }
  template <typename V>
  __device__ static V reduce(V v) { return warp_reduce(v); }
};

struct BlockPerRow {
  static constexpr int kRowsPerBlock = 1;
  static constexpr int kWidth = kThreads;
  __device__ static int row() { return blockIdx.x; }
  __device__ static int lane() { return threadIdx.x; }
  template <typename V>
  __device__ static V reduce(V v) { return block_reduce(v); }
};

template <typename T>
__device__ Compute load(const T* x, int index) {
  return static_cast<Compute>(x[index]);
}

template <typename Group, typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_xent_rows(const T* __restrict__ logits, const int32_t* __restrict__ labels, int batch,
                      xent::Params<Compute> params, T* __restrict__ dlogits,
                      XentRow* __restrict__ rows) {
  const int row = Group::row();
  // Whole warps leave together (WarpPerRow), or no thread at all (BlockPerRow has one block
  // a row), so no thread that stays waits at a barrier or shuffle for one that left.
  if (row >= batch) return;
  const int classes = params.classes;
  const T* x = logits + static_cast<size_t>(row) * classes;
  const int label = labels[row];
  const bool label_ok = label >= 0 && label < classes;

  xent::RowMax<Compute> best = xent::row_max_identity<Compute>(classes);
  for (int c = Group::lane(); c < classes; c += Group::kWidth)
    best = xent::combine(best, xent::RowMax<Compute>{load(x, c), c});
  best = Group::reduce(best);

  // A bad label is ranked as class 0, so that the loop reads only the row; its counts are
  // dropped below.
  const int ranked = label_ok ? label : 0;
  const Compute label_logit = load(x, ranked);
  xent::RowSums<Compute> sums{0, 0};
  xent::LabelRank rank{0};
  for (int c = Group::lane(); c < classes; c += Group::kWidth) {
    const Compute logit = load(x, c);
    sums = xent::combine(sums, xent::row_sums_term(logit, best.value));
    rank = xent::combine(rank, xent::label_rank_term(logit, c, label_logit, ranked));
  }
  sums = Group::reduce(sums);
  rank = Group::reduce(rank);
  const Compute lse = xent::log_sum_exp(sums);

  if (Group::lane() == 0) {
    XentRow out;
    out.loss = label_ok ? xent::row_loss(params, lse, label_logit - best.value, sums) : NAN;
    out.correct = label_ok && best.index == label;
    out.correct_top5 = label_ok && rank.ahead < xent::kTopK;
    out.bad_label = !label_ok;
    rows[row] = out;
  }
  if (dlogits == nullptr) return;
  T* dx = dlogits + static_cast<size_t>(row) * classes;
  for (int c = Group::lane(); c < classes; c += Group::kWidth) {
    const Compute grad = label_ok ? xent::dlogit(params, load(x, c) - best.value, lse, c == label)
                                  : Compute(NAN);
    dx[c] = static_cast<T>(grad);
  }
}

// One block sums the rows: each thread a strided slice, then a fixed tree, in double so that
// the mean of a large batch loses nothing to the order.
__global__ void __launch_bounds__(kThreads)
    softmax_xent_finish(const XentRow* __restrict__ rows, int batch, XentMetrics* metrics) {
  __shared__ double loss[kThreads];
  __shared__ long long correct[kThreads], correct_top5[kThreads], bad_labels[kThreads];
  const int t = threadIdx.x;
  loss[t] = 0.0;
  correct[t] = correct_top5[t] = bad_labels[t] = 0;
  for (int row = t; row < batch; row += kThreads) {
    const XentRow r = rows[row];
    loss[t] += r.loss;
    correct[t] += r.correct;
    correct_top5[t] += r.correct_top5;
    bad_labels[t] += r.bad_label;
  }
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      loss[t] += loss[t + half];
      correct[t] += correct[t + half];
      correct_top5[t] += correct_top5[t + half];
      bad_labels[t] += bad_labels[t + half];
    }
    __syncthreads();
  }
  if (t == 0) *metrics = XentMetrics{loss[0] / batch, correct[0], correct_top5[0], bad_labels[0]};
}

template <typename Group, typename T>
void launch_rows(const T* logits, const int32_t* labels, int batch,
                 const xent::Params<Compute>& params, T* dlogits, XentRow* rows,
                 cudaStream_t stream) {
  const int blocks = (batch + Group::kRowsPerBlock - 1) / Group::kRowsPerBlock;
  softmax_xent_rows<Group, T><<<blocks, kThreads, 0, stream>>>(logits, labels, batch, params,
                                                               dlogits, rows);
  RDDP_CUDA_CHECK_LAUNCH("softmax_xent_rows");
}

}  // namespace

template <typename T>
void softmax_cross_entropy(const T* logits, const int32_t* labels, int batch, int classes,
                           float label_smoothing, T* dlogits, XentRow* row_workspace,
                           XentMetrics* metrics, cudaStream_t stream) {
  if (batch < 1 || classes < 1)
    fail("softmax_cross_entropy: batch (", batch, ") and classes (", classes,
         ") must both be at least 1");
  if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
    fail("softmax_cross_entropy: label smoothing must be in [0, 1], got ", label_smoothing);
  const auto params = xent::make_params<Compute>(label_smoothing, classes, batch);
  if (classes <= kWarpPerRowMaxClasses)
    launch_rows<WarpPerRow>(logits, labels, batch, params, dlogits, row_workspace, stream);
  else
    launch_rows<BlockPerRow>(logits, labels, batch, params, dlogits, row_workspace, stream);
  softmax_xent_finish<<<1, kThreads, 0, stream>>>(row_workspace, batch, metrics);
  RDDP_CUDA_CHECK_LAUNCH("softmax_xent_finish");
}

template void softmax_cross_entropy<float>(const float*, const int32_t*, int, int, float, float*,
                                           XentRow*, XentMetrics*, cudaStream_t);

}  // namespace rddp::cuda
