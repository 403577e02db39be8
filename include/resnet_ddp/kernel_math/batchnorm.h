#pragma once
// The maths of our BatchNorm2d kernels (kernels/batchnorm.cu): every per-value formula and every
// way of combining two partial results. tests/unit/test_batchnorm_math.cpp drives the same
// functions on the CPU, in the order the kernels apply them (include/resnet_ddp/kernel_math/batchnorm_partition.h says
// which thread and block see which values), against src/cpu/batchnorm.cpp and float64.
//
// Semantics: torch.nn.BatchNorm2d in training mode, which cuDNN's legacy BatchNorm computes too.
// Over the M = N * H * W values of a channel:
//   mean, var = the biased variance, invstd = 1 / sqrt(var + eps);
//   y = act(gamma * (x - mean) * invstd + beta [+ z]), act = ReLU or identity, z a residual;
//   running_mean = (1 - momentum) * running_mean + momentum * mean;
//   running_var  = (1 - momentum) * running_var + momentum * var * M / (M - 1)  (unbiased).
// Backward, with g = dy, or 0 where a fused ReLU's output is <= 0 (torch's threshold_backward on
// the output, as relu_backward in kernels/elementwise.cu), and xhat = (x - mean) * invstd:
//   dbeta = sum g, dgamma = sum g * xhat,
//   dx = gamma * invstd * (g - dbeta / M - xhat * dgamma / M).
// The arrangement of each formula is PyTorch's CUDA kernels' (Normalization.cuh), in float.
//
// Statistics are moments (count, mean, M2 = sum of squared deviations from the mean), merged
// pairwise by Chan, Golub and LeVeque's update: a channel of millions of values never goes
// through one long running sum, and there is no sum(x^2) - M * mean^2 to cancel.
#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::bn {

// ---- statistics

template <typename Real>
struct Moments {
  Real count, mean, m2;
};

// The weight of the second part's mean in the merge: nb / (na + nb); zero when both parts are
// empty, so that merging empty parts stays empty instead of making 0 / 0.
template <typename Real>
RDDP_HD Real share_of_second(Real count_a, Real count_b) {
  const Real total = count_a + count_b;
  return total > Real(0) ? count_b / total : Real(0);
}

// (mean, m2) of a part of `count_a` values absorbs another part's (mean_b, m2_b), of weight
// `share` = share_of_second(count_a, count_b); the caller adds the counts. The form of PyTorch's
// welford_merge. Split from the count so that channels that share one count (those one thread
// reads side by side in NHWC) share the division too. An empty part has mean 0 and m2 0, which
// merge exactly: an empty `a` takes b's mean and m2 unchanged.
template <typename Real>
RDDP_HD void merge_moments(Real& mean, Real& m2, Real count_a, Real mean_b, Real m2_b,
                           Real share) {
  const Real delta = mean_b - mean;
  mean += delta * share;
  m2 += m2_b + delta * delta * count_a * share;
}

template <typename Real>
RDDP_HD Moments<Real> merged(Moments<Real> a, const Moments<Real>& b) {
  merge_moments(a.mean, a.m2, a.count, b.mean, b.m2, share_of_second(a.count, b.count));
  a.count += b.count;
  return a;
}

// The moments of K values held at once (one thread's loads of one channel), by two passes over
// them: exact up to the roundings of K additions, and no division but by the constant K.
template <int K, typename Real>
RDDP_HD void group_moments(const Real (&values)[K], Real& mean, Real& m2) {
  Real sum = 0;
  RDDP_UNROLL
  for (int k = 0; k < K; ++k) sum += values[k];
  mean = sum / static_cast<Real>(K);
  m2 = 0;
  RDDP_UNROLL
  for (int k = 0; k < K; ++k) {
    const Real deviation = values[k] - mean;
    m2 += deviation * deviation;
  }
}

// What one thread has seen of `Slots` channels, the same number of values of each (so one
// count): NHWC threads read Slots = vector width channels side by side, NCHW threads one.
template <typename Real, int Slots>
struct SlotMoments {
  Real count;
  Real mean[Slots];
  Real m2[Slots];
};

template <typename Real, int Slots>
RDDP_HD SlotMoments<Real, Slots> no_moments() {
  SlotMoments<Real, Slots> s;
  s.count = 0;
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j) s.mean[j] = s.m2[j] = 0;
  return s;
}

// Absorbs a group of PerSlot new values of every slot: values[j][k] is the k-th of slot j.
template <typename Real, int Slots, int PerSlot>
RDDP_HD void add_group(SlotMoments<Real, Slots>& s, const Real (&values)[Slots][PerSlot]) {
  const Real share = share_of_second(s.count, static_cast<Real>(PerSlot));
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j) {
    Real mean, m2;
    group_moments(values[j], mean, m2);
    merge_moments(s.mean[j], s.m2[j], s.count, mean, m2, share);
  }
  s.count += static_cast<Real>(PerSlot);
}

// `a` absorbs `b`, slot by slot.
template <typename Real, int Slots>
RDDP_HD void merge_slots(SlotMoments<Real, Slots>& a, const SlotMoments<Real, Slots>& b) {
  const Real share = share_of_second(a.count, b.count);
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j)
    merge_moments(a.mean[j], a.m2[j], a.count, b.mean[j], b.m2[j], share);
  a.count += b.count;
}

// 1 / sqrt(var + eps), as PyTorch's InvStd (a division by a correctly rounded square root).
template <typename Real>
RDDP_HD Real invstd_of(Real variance, Real eps) {
  return Real(1) / hd::sqrt_of(variance + eps);
}

// One channel's results from its merged moments over `count` = M values (M >= 2).
template <typename Real>
struct ChannelStats {
  Real mean, invstd;
  Real running_mean, running_var;  // after this batch's update
};

template <typename Real>
RDDP_HD ChannelStats<Real> channel_stats(Real count, Real mean, Real m2, Real eps, Real momentum,
                                         Real running_mean, Real running_var) {
  const Real variance = m2 / count;            // biased: normalises
  const Real unbiased = m2 / (count - Real(1));  // tracked for evaluation
  ChannelStats<Real> s;
  s.mean = mean;
  s.invstd = invstd_of(variance, eps);
  s.running_mean = (Real(1) - momentum) * running_mean + momentum * mean;
  s.running_var = (Real(1) - momentum) * running_var + momentum * unbiased;
  return s;
}

// ---- forward: y = act((x - mean) * (gamma * invstd) + beta [+ z])

template <typename Real>
struct Normalize {
  Real mean, scale, beta;
};

template <typename Real>
RDDP_HD Normalize<Real> make_normalize(Real mean, Real invstd, Real gamma, Real beta) {
  return {mean, gamma * invstd, beta};
}

// As torch.relu: NaN and -0.0 pass.
template <typename Real>
RDDP_HD Real relu(Real v) {
  return v < Real(0) ? Real(0) : v;
}

// The residual is added only when there is one (adding 0 would turn a -0.0 into +0.0), after
// BatchNorm and before the ReLU, as a ResNet block's output relu(bn2(...) + identity).
template <typename Real>
RDDP_HD Real forward_output(const Normalize<Real>& n, Real x, bool has_residual, Real residual,
                            bool apply_relu) {
  Real v = (x - n.mean) * n.scale + n.beta;
  if (has_residual) v += residual;
  return apply_relu ? relu(v) : v;
}

// relu(BatchNorm(x)) with no residual, rounded to the stored type Stored and widened back: the
// value the training output pass stores. Whatever stands in for that stored output (the ReLU's
// mask recomputed in backward, the max-pool normalising the stem's output on the fly) computes
// it here, so that it sees the same bits.
template <typename Stored, typename Real>
RDDP_HD Real stored_relu_output(const Normalize<Real>& n, Real x) {
  return static_cast<Real>(static_cast<Stored>(forward_output(n, x, false, Real(0), true)));
}

// ---- backward

// dy where the ReLU let its input through, else 0: relu_backward's test on the output, so a NaN
// output passes its gradient as torch's threshold_backward does.
template <typename Real>
RDDP_HD Real relu_masked(Real dy, Real relu_output) {
  return relu_output <= Real(0) ? Real(0) : dy;
}

// Per-slot sums of g and g * (x - mean) (the latter times invstd is dgamma), plain float sums:
// each thread's run is short and the runs are added in a fixed tree.
template <typename Real, int Slots>
struct SlotSums {
  Real g[Slots];
  Real g_xmu[Slots];
};

template <typename Real, int Slots>
RDDP_HD SlotSums<Real, Slots> no_sums() {
  SlotSums<Real, Slots> s;
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j) s.g[j] = s.g_xmu[j] = 0;
  return s;
}

// Absorbs a group of PerSlot values of every slot (laid out as in add_group): each slot's group
// is summed first and then added to the running sums, which so take one addition per group.
template <typename Real, int Slots, int PerSlot>
RDDP_HD void add_grad_group(SlotSums<Real, Slots>& s, const Real (&g)[Slots][PerSlot],
                            const Real (&x)[Slots][PerSlot], const Real (&mean)[Slots]) {
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j) {
    Real sum_g = 0, sum_g_xmu = 0;
    RDDP_UNROLL
    for (int k = 0; k < PerSlot; ++k) {
      sum_g += g[j][k];
      sum_g_xmu += g[j][k] * (x[j][k] - mean[j]);
    }
    s.g[j] += sum_g;
    s.g_xmu[j] += sum_g_xmu;
  }
}

// `a` absorbs `b`, slot by slot.
template <typename Real, int Slots>
RDDP_HD void add_sums(SlotSums<Real, Slots>& a, const SlotSums<Real, Slots>& b) {
  RDDP_UNROLL
  for (int j = 0; j < Slots; ++j) {
    a.g[j] += b.g[j];
    a.g_xmu[j] += b.g_xmu[j];
  }
}

template <typename Real>
struct ParamGrads {
  Real dgamma, dbeta;
};

template <typename Real>
RDDP_HD ParamGrads<Real> param_grads(Real sum_g, Real sum_g_xmu, Real invstd) {
  return {sum_g_xmu * invstd, sum_g};
}

// dx = (g - mean_g - (x - mean) * proj) * scale, PyTorch's batch_norm_backward_elemt:
// mean_g = dbeta / M, proj = invstd^2 * sum(g * (x - mean)) / M = invstd * dgamma / M,
// scale = gamma * invstd.
template <typename Real>
struct DataGrad {
  Real mean, mean_g, proj, scale;
};

template <typename Real>
RDDP_HD DataGrad<Real> make_data_grad(Real mean, Real invstd, Real gamma, Real dgamma, Real dbeta,
                                      Real inv_count) {
  return {mean, dbeta * inv_count, invstd * dgamma * inv_count, gamma * invstd};
}

template <typename Real>
RDDP_HD Real data_grad(const DataGrad<Real>& d, Real g, Real x) {
  return (g - d.mean_g - (x - d.mean) * d.proj) * d.scale;
}

}  // namespace rddp::bn
