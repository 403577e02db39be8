#pragma once
// The maths of fused softmax + cross-entropy, shared by kernels/softmax_xent.cu and its CPU
// twin src/cpu/softmax_xent.cpp. Only the reductions differ between the two (a loop here, warp
// shuffles and shared memory there); every per-element formula and every way of combining two
// partial results is below.
//
// A row x of C logits with label y is reduced twice:
//   1. its first maximum: the value m shifts the exponentials so that they cannot overflow,
//      and the index is the prediction (torch.argmax's first maximum, NaN counting as largest);
//   2. S = sum_c exp(z_c) and, for label smoothing, Z = sum_c z_c, where z = x - m; and the
//      label's rank: how many logits come before x_y in the order that picks the maximum.
// With lse = log S, -log p_c = lse - z_c, so nn.CrossEntropyLoss's smoothed loss
//   (1 - eps) * (lse - z_y) + eps / C * sum_c (lse - z_c)
// is lse - (1 - eps) * z_y - eps / C * Z, and the gradient of the batch mean is
//   (p_c - (1 - eps) * [c == y] - eps / C) / N,  with p_c = exp(z_c - lse).
// Compute is the arithmetic type; the storage type of the logits only meets it in loads and
// stores, so a bf16 or fp16 variant changes no formula.
#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::xent {

// Per-call constants, computed once rather than per element.
template <typename Compute>
struct Params {
  int classes;
  Compute smoothing;   // eps in [0, 1]
  Compute off_target;  // eps / C: the smoothed target of every class
  Compute on_target;   // 1 - eps + eps / C: the smoothed target of the label
  Compute inv_batch;   // 1 / N, so dlogits is the gradient of the mean loss
};

template <typename Compute>
RDDP_HD Params<Compute> make_params(Compute smoothing, int classes, int batch) {
  const Compute off_target = smoothing / static_cast<Compute>(classes);
  return {classes, smoothing, off_target, Compute(1) - smoothing + off_target,
          Compute(1) / static_cast<Compute>(batch)};
}

// The running first maximum of a row.
template <typename Compute>
struct RowMax {
  Compute value;
  int index;
};

// Loses to every logit: -inf ties with a -inf logit and then loses on the index, because no
// logit has an index as large as `classes`.
template <typename Compute>
RDDP_HD RowMax<Compute> row_max_identity(int classes) {
  return {-static_cast<Compute>(INFINITY), classes};
}

// Whether `a` is the first maximum of the union of the two ranges. The order is total (the
// index breaks every tie), so any reduction tree gives the same answer as a left-to-right scan.
template <typename Compute>
RDDP_HD bool precedes(const RowMax<Compute>& a, const RowMax<Compute>& b) {
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan != b_nan) return a_nan;
  if (a_nan || a.value == b.value) return a.index < b.index;
  return a.value > b.value;
}

template <typename Compute>
RDDP_HD RowMax<Compute> combine(const RowMax<Compute>& a, const RowMax<Compute>& b) {
  return precedes(a, b) ? a : b;
}

// The running sums of the second pass.
template <typename Compute>
struct RowSums {
  Compute exp_sum;      // S = sum exp(z_c)
  Compute shifted_sum;  // Z = sum z_c, only needed with label smoothing
};

template <typename Compute>
RDDP_HD RowSums<Compute> combine(const RowSums<Compute>& a, const RowSums<Compute>& b) {
  return {a.exp_sum + b.exp_sum, a.shifted_sum + b.shifted_sum};
}

// One logit's contribution to the sums, given the row maximum.
template <typename Compute>
RDDP_HD RowSums<Compute> row_sums_term(Compute logit, Compute row_max) {
  const Compute shifted = logit - row_max;
  return {hd::exp_of(shifted), shifted};
}

// Rank 0 is the first maximum, so top-1 is rank 0 and top-k is rank < k (torch.topk's
// membership, which leaves the order of equal logits open; here the lower index comes first).
constexpr int kTopK = 5;

struct LabelRank {
  int ahead;  // logits that precede the label's
};

RDDP_HD LabelRank combine(const LabelRank& a, const LabelRank& b) {
  return {a.ahead + b.ahead};
}

template <typename Compute>
RDDP_HD LabelRank label_rank_term(Compute logit, int index, Compute label_logit, int label) {
  return {precedes(RowMax<Compute>{logit, index}, RowMax<Compute>{label_logit, label}) ? 1 : 0};
}

template <typename Compute>
RDDP_HD Compute log_sum_exp(const RowSums<Compute>& sums) {
  return hd::log_of(sums.exp_sum);
}

// The row's loss from lse, z_y and Z.
template <typename Compute>
RDDP_HD Compute row_loss(const Params<Compute>& params, Compute lse, Compute shifted_label,
                         const RowSums<Compute>& sums) {
  Compute loss = lse - (Compute(1) - params.smoothing) * shifted_label;
  // Without smoothing the Z term must be left out, not multiplied by zero: a logit of -inf
  // makes Z = -inf, and 0 * -inf would turn a finite loss into NaN.
  if (params.smoothing != Compute(0)) loss -= params.off_target * sums.shifted_sum;
  return loss;
}

// d(mean loss)/d(logit c) from z_c and lse.
template <typename Compute>
RDDP_HD Compute dlogit(const Params<Compute>& params, Compute shifted, Compute lse,
                       bool is_label) {
  const Compute probability = hd::exp_of(shifted - lse);
  const Compute target = is_label ? params.on_target : params.off_target;
  return (probability - target) * params.inv_batch;
}

}  // namespace rddp::xent
