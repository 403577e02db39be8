// The maths of our BatchNorm kernels (include/resnet_ddp/kernel_math/batchnorm.h), run on the CPU in the order the
// kernels run it: the same walkers hand each (block, thread) its loads
// (include/resnet_ddp/kernel_math/batchnorm_partition.h), each thread's values go through the same group and merge
// functions, blocks merge their threads down the same tree, and each channel's partials are
// folded as a warp folds them. The results are compared with the CPU twin (src/cpu/batchnorm.cpp,
// the GPU tests' oracle) and with the definitions computed directly in double, in both memory
// formats, at every vector width, with and without the fused residual, ReLU and ReLU mask.
// What this cannot check is the CUDA code around the maths (loads, shared memory, shuffles):
// tests/gpu/test_cuda_batchnorm_kernels.cpp does, on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "resnet_ddp/kernel_math/batchnorm.h"
#include "resnet_ddp/kernel_math/batchnorm_partition.h"
#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/layout_copies.h"
#include "support/test_tensors.h"

using namespace rddp;

namespace {

constexpr float kMomentum = 0.1f;
constexpr float kEpsilon = 1e-5f;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int batch, channels, height, width;
  int64_t plane() const { return static_cast<int64_t>(height) * width; }
  int64_t per_channel() const { return batch * plane(); }
  size_t count() const { return static_cast<size_t>(per_channel()) * channels; }
};

std::string describe(const Shape& s, bool channels_last, int vector) {
  return std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" +
         std::to_string(s.height) + "x" + std::to_string(s.width) +
         (channels_last ? " nhwc" : " nchw") + " vector " + std::to_string(vector);
}

bn::Partition partition_of(const Shape& s, bool channels_last) {
  return bn::make_partition(s.batch, s.channels, s.height, s.width, channels_last);
}

// The values of an NCHW tensor stored in the given format, and back.
std::vector<float> stored(const std::vector<float>& nchw, const Shape& s, bool channels_last) {
  return testing::in_layout(nchw, channels_last, s.channels, s.height, s.width);
}

std::vector<float> unstored(const std::vector<float>& values, const Shape& s,
                            bool channels_last) {
  return testing::from_layout(values, channels_last, s.channels, s.height, s.width);
}

// ---- the kernels' work, replayed

// Calls visit(loads) for each group of loads of thread (lane, row) of block (group, split), as
// the kernels' walk() does; returns the thread's first channel, or -1 when it reads nothing.
template <bool ChannelsLast, int V, typename Visit>
int walk_thread(const bn::Partition& p, int group, int split, int lane, int row, Visit&& visit) {
  const int first = ChannelsLast ? bn::nhwc_first_channel(p, group, lane, V) : group;
  if (ChannelsLast && first >= p.channels) return -1;
  if constexpr (ChannelsLast)
    bn::walk_nhwc<bn::kUnroll>(p, bn::block_shape(p, V), split, row, first, visit);
  else
    bn::walk_nchw<bn::kUnroll>(p, V, first, split, row, visit);
  return first;
}

template <bool ChannelsLast, int V, int N>
using SlotValues = float[bn::kSlots<ChannelsLast, V>][bn::kPerSlot<ChannelsLast, V, N>];

template <bool ChannelsLast, int V, int N>
void gather(const float* base, const bn::Loads<N>& loads, SlotValues<ChannelsLast, V, N>& values) {
  for (int u = 0; u < N; ++u)
    for (int k = 0; k < V; ++k)
      values[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)] =
          base[loads.offset[u] + k];
}

template <bool ChannelsLast, int V, int N>
void scatter(float* base, const bn::Loads<N>& loads,
             const SlotValues<ChannelsLast, V, N>& values) {
  for (int u = 0; u < N; ++u)
    for (int k = 0; k < V; ++k)
      base[loads.offset[u] + k] =
          values[bn::slot_of<ChannelsLast, V>(k)][bn::position_of<ChannelsLast, V>(u, k)];
}

// Calls fn(group, split, lane, row) for every thread of the grid, block by block.
template <typename Fn>
void for_each_thread(const bn::Partition& p, int vector, Fn&& fn) {
  const bn::BlockShape shape = bn::block_shape(p, vector);
  for (int group = 0; group < p.channel_groups; ++group)
    for (int split = 0; split < p.splits; ++split)
      for (int row = 0; row < shape.rows; ++row)
        for (int lane = 0; lane < shape.lanes; ++lane) fn(group, split, lane, row);
}

// The block's tree (kernels' block_merge / block_sum): row r absorbs row r + half, half halving.
template <typename State, typename Absorb>
void block_tree(std::vector<State>& threads, const bn::BlockShape& shape, Absorb&& absorb) {
  for (int half = shape.rows / 2; half > 0; half /= 2)
    for (int row = 0; row < half; ++row)
      for (int lane = 0; lane < shape.lanes; ++lane)
        absorb(threads[static_cast<size_t>(row * shape.lanes + lane)],
               threads[static_cast<size_t>((row + half) * shape.lanes + lane)]);
}

// A warp's fold of one channel's partials: lane l takes splits l, l + 32, ... in order, then lane
// l absorbs lane l + offset for offset = 16, 8, 4, 2, 1.
template <typename State, typename Read, typename Absorb>
State warp_fold(int splits, State empty, Read&& read, Absorb&& absorb) {
  std::vector<State> lanes(bn::kWarp, empty);
  for (int lane = 0; lane < bn::kWarp; ++lane)
    for (int split = lane; split < splits; split += bn::kWarp) absorb(lanes[lane], read(split));
  for (int offset = bn::kWarp / 2; offset > 0; offset /= 2)
    for (int lane = 0; lane < offset; ++lane) absorb(lanes[lane], lanes[lane + offset]);
  return lanes[0];
}

struct Stats {
  std::vector<float> mean, invstd, running_mean, running_var;
};

// batch_moments_kernel, then finish_moments_kernel.
template <bool ChannelsLast, int V>
Stats replay_statistics(const bn::Partition& p, const std::vector<float>& x,
                        const std::vector<float>& running_mean,
                        const std::vector<float>& running_var) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  using State = bn::SlotMoments<float, Slots>;
  const bn::BlockShape shape = bn::block_shape(p, V);
  const int64_t stride = bn::partials_per_array(p);
  std::vector<float> partials(static_cast<size_t>(bn::kPartialArrays * stride), kNaN);
  std::vector<State> threads(bn::kThreads);
  std::vector<int> firsts(bn::kThreads);
  for_each_thread(p, V, [&](int group, int split, int lane, int row) {
    const size_t me = static_cast<size_t>(row * shape.lanes + lane);
    State& state = threads[me] = bn::no_moments<float, Slots>();
    firsts[me] = walk_thread<ChannelsLast, V>(p, group, split, lane, row, [&](const auto& loads) {
      constexpr int N = std::decay_t<decltype(loads)>::kCount;
      SlotValues<ChannelsLast, V, N> values;
      gather<ChannelsLast, V>(x.data(), loads, values);
      bn::add_group(state, values);
    });
    if (me + 1 != bn::kThreads) return;  // the block's last thread: merge and store
    block_tree(threads, shape, [](State& a, const State& b) { bn::merge_slots(a, b); });
    for (int l = 0; l < shape.lanes; ++l) {
      if (firsts[static_cast<size_t>(l)] < 0) continue;
      for (int j = 0; j < Slots; ++j) {
        const int64_t i = bn::partial_index(p, firsts[static_cast<size_t>(l)] + j, split);
        partials[static_cast<size_t>(i)] = threads[static_cast<size_t>(l)].mean[j];
        partials[static_cast<size_t>(stride + i)] = threads[static_cast<size_t>(l)].m2[j];
        partials[static_cast<size_t>(2 * stride + i)] = threads[static_cast<size_t>(l)].count;
      }
    }
  });
  Stats out;
  for (int c = 0; c < p.channels; ++c) {
    const bn::Moments<float> total = warp_fold(
        p.splits, bn::Moments<float>{0, 0, 0},
        [&](int split) {
          const size_t i = static_cast<size_t>(bn::partial_index(p, c, split));
          return bn::Moments<float>{partials[2 * stride + i], partials[i],
                                    partials[stride + i]};
        },
        [](bn::Moments<float>& a, const bn::Moments<float>& b) { a = bn::merged(a, b); });
    const auto s = bn::channel_stats(static_cast<float>(p.per_channel), total.mean, total.m2,
                                     kEpsilon, kMomentum, running_mean[static_cast<size_t>(c)],
                                     running_var[static_cast<size_t>(c)]);
    out.mean.push_back(s.mean);
    out.invstd.push_back(s.invstd);
    out.running_mean.push_back(s.running_mean);
    out.running_var.push_back(s.running_var);
  }
  return out;
}

// normalize_kernel; `spread` is invstd, or the variance when spread_is_variance.
template <bool ChannelsLast, int V>
std::vector<float> replay_normalize(const bn::Partition& p, const std::vector<float>& x,
                                    const std::vector<float>* residual, bool relu,
                                    const std::vector<float>& mean,
                                    const std::vector<float>& spread, bool spread_is_variance,
                                    const std::vector<float>& gamma,
                                    const std::vector<float>& beta) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  std::vector<float> y(x.size(), kNaN);
  for_each_thread(p, V, [&](int group, int split, int lane, int row) {
    bn::Normalize<float> coefficients[Slots] = {};
    const int first = ChannelsLast ? bn::nhwc_first_channel(p, group, lane, V) : group;
    for (int j = 0; j < Slots && first + j < p.channels; ++j) {
      const size_t c = static_cast<size_t>(first + j);
      const float invstd = spread_is_variance ? bn::invstd_of(spread[c], kEpsilon) : spread[c];
      coefficients[j] = bn::make_normalize(mean[c], invstd, gamma[c], beta[c]);
    }
    walk_thread<ChannelsLast, V>(p, group, split, lane, row, [&](const auto& loads) {
      constexpr int N = std::decay_t<decltype(loads)>::kCount;
      SlotValues<ChannelsLast, V, N> values, residuals = {};
      gather<ChannelsLast, V>(x.data(), loads, values);
      if (residual) gather<ChannelsLast, V>(residual->data(), loads, residuals);
      for (int j = 0; j < Slots; ++j)
        for (int k = 0; k < bn::kPerSlot<ChannelsLast, V, N>; ++k)
          values[j][k] = bn::forward_output(coefficients[j], values[j][k], residual != nullptr,
                                            residual ? residuals[j][k] : 0.0f, relu);
      scatter<ChannelsLast, V>(y.data(), loads, values);
    });
  });
  return y;
}

template <bool ChannelsLast, int V, int N>
void gather_grad(const std::vector<float>& dy, const std::vector<float>* relu_output,
                 const bn::Loads<N>& loads, SlotValues<ChannelsLast, V, N>& g) {
  gather<ChannelsLast, V>(dy.data(), loads, g);
  if (!relu_output) return;
  SlotValues<ChannelsLast, V, N> outputs;
  gather<ChannelsLast, V>(relu_output->data(), loads, outputs);
  for (int j = 0; j < bn::kSlots<ChannelsLast, V>; ++j)
    for (int k = 0; k < bn::kPerSlot<ChannelsLast, V, N>; ++k)
      g[j][k] = bn::relu_masked(g[j][k], outputs[j][k]);
}

struct Grads {
  std::vector<float> dx, dgamma, dbeta, masked_dy;
};

// grad_sums_kernel, finish_grad_sums_kernel, data_grad_kernel.
template <bool ChannelsLast, int V>
Grads replay_backward(const bn::Partition& p, const std::vector<float>& x,
                      const std::vector<float>& dy, const std::vector<float>* relu_output,
                      const std::vector<float>& gamma, const std::vector<float>& save_mean,
                      const std::vector<float>& save_invstd) {
  constexpr int Slots = bn::kSlots<ChannelsLast, V>;
  using State = bn::SlotSums<float, Slots>;
  const bn::BlockShape shape = bn::block_shape(p, V);
  const int64_t stride = bn::partials_per_array(p);
  std::vector<float> partials(static_cast<size_t>(2 * stride), kNaN);
  std::vector<State> threads(bn::kThreads);
  std::vector<int> firsts(bn::kThreads);
  Grads out;
  out.masked_dy.assign(x.size(), kNaN);
  for_each_thread(p, V, [&](int group, int split, int lane, int row) {
    const size_t me = static_cast<size_t>(row * shape.lanes + lane);
    State& sums = threads[me] = bn::no_sums<float, Slots>();
    const int first = ChannelsLast ? bn::nhwc_first_channel(p, group, lane, V) : group;
    float mean[Slots] = {};
    for (int j = 0; j < Slots && first + j < p.channels; ++j)
      mean[j] = save_mean[static_cast<size_t>(first + j)];
    firsts[me] = walk_thread<ChannelsLast, V>(p, group, split, lane, row, [&](const auto& loads) {
      constexpr int N = std::decay_t<decltype(loads)>::kCount;
      SlotValues<ChannelsLast, V, N> g, values;
      gather_grad<ChannelsLast, V>(dy, relu_output, loads, g);
      gather<ChannelsLast, V>(x.data(), loads, values);
      bn::add_grad_group(sums, g, values, mean);
      scatter<ChannelsLast, V>(out.masked_dy.data(), loads, g);
    });
    if (me + 1 != bn::kThreads) return;
    block_tree(threads, shape, [](State& a, const State& b) { bn::add_sums(a, b); });
    for (int l = 0; l < shape.lanes; ++l) {
      if (firsts[static_cast<size_t>(l)] < 0) continue;
      for (int j = 0; j < Slots; ++j) {
        const int64_t i = bn::partial_index(p, firsts[static_cast<size_t>(l)] + j, split);
        partials[static_cast<size_t>(i)] = threads[static_cast<size_t>(l)].g[j];
        partials[static_cast<size_t>(stride + i)] = threads[static_cast<size_t>(l)].g_xmu[j];
      }
    }
  });
  struct Pair {
    float g, g_xmu;
  };
  for (int c = 0; c < p.channels; ++c) {
    const Pair total = warp_fold(
        p.splits, Pair{0, 0},
        [&](int split) {
          const size_t i = static_cast<size_t>(bn::partial_index(p, c, split));
          return Pair{partials[i], partials[stride + i]};
        },
        [](Pair& a, const Pair& b) {
          a.g += b.g;
          a.g_xmu += b.g_xmu;
        });
    const auto grads = bn::param_grads(total.g, total.g_xmu, save_invstd[static_cast<size_t>(c)]);
    out.dgamma.push_back(grads.dgamma);
    out.dbeta.push_back(grads.dbeta);
  }
  const float inv_count = static_cast<float>(1.0 / static_cast<double>(p.per_channel));
  out.dx.assign(x.size(), kNaN);
  for_each_thread(p, V, [&](int group, int split, int lane, int row) {
    bn::DataGrad<float> coefficients[Slots] = {};
    const int first = ChannelsLast ? bn::nhwc_first_channel(p, group, lane, V) : group;
    for (int j = 0; j < Slots && first + j < p.channels; ++j) {
      const size_t c = static_cast<size_t>(first + j);
      coefficients[j] = bn::make_data_grad(save_mean[c], save_invstd[c], gamma[c],
                                           out.dgamma[c], out.dbeta[c], inv_count);
    }
    walk_thread<ChannelsLast, V>(p, group, split, lane, row, [&](const auto& loads) {
      constexpr int N = std::decay_t<decltype(loads)>::kCount;
      SlotValues<ChannelsLast, V, N> g, values;
      gather_grad<ChannelsLast, V>(dy, relu_output, loads, g);
      gather<ChannelsLast, V>(x.data(), loads, values);
      for (int j = 0; j < Slots; ++j)
        for (int k = 0; k < bn::kPerSlot<ChannelsLast, V, N>; ++k)
          values[j][k] = bn::data_grad(coefficients[j], g[j][k], values[j][k]);
      scatter<ChannelsLast, V>(out.dx.data(), loads, values);
    });
  });
  return out;
}

// Calls fn(std::bool_constant<ChannelsLast>, std::integral_constant<int, V>).
template <typename Fn>
void dispatch(bool channels_last, int vector, Fn&& fn) {
  auto with_vector = [&](auto layout) {
    switch (vector) {
      case 8: return fn(layout, std::integral_constant<int, 8>{});
      case 4: return fn(layout, std::integral_constant<int, 4>{});
      case 2: return fn(layout, std::integral_constant<int, 2>{});
      default: return fn(layout, std::integral_constant<int, 1>{});
    }
  };
  if (channels_last)
    with_vector(std::true_type{});
  else
    with_vector(std::false_type{});
}

// ---- references

// |got - want| <= rel * (|want| + scale[channel of i]) for every element (NCHW order); a NaN
// fails. Returns the worst ratio of error to bound.
double check_close(const std::string& what, const std::vector<float>& got,
                   const std::vector<double>& want, const std::vector<double>& scale,
                   int64_t per_channel_run, double rel) {
  REQUIRE(got.size() == want.size());
  size_t failed = 0;
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t c = static_cast<size_t>(static_cast<int64_t>(i) / per_channel_run) % scale.size();
    const double bound = rel * (std::fabs(want[i]) + scale[c]);
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (error <= bound) {
      worst = std::max(worst, bound > 0 ? error / bound : 0.0);
      continue;
    }
    if (failed++ < 5)
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                      << bound);
  }
  CHECK_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " off");
  return worst;
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The definitions, directly in double over NCHW values: statistics by two passes, then each
// formula of kernel_math/batchnorm.h's header comment as written there.
struct Direct {
  std::vector<double> mean, invstd, running_mean, running_var, y;
  std::vector<double> dgamma, dbeta, dx, g;
  std::vector<double> x_terms, y_terms, dx_terms, sum_terms_g, sum_terms_gxhat;
};

Direct direct(const Shape& s, const std::vector<float>& xf, const std::vector<float>& gammaf,
              const std::vector<float>& betaf, const std::vector<float>& rmf,
              const std::vector<float>& rvf, const std::vector<float>* residual, bool relu,
              const std::vector<float>& dyf, const std::vector<float>* relu_output) {
  Direct d;
  const int64_t plane = s.plane(), m = s.per_channel();
  auto at = [&](int n, int c, int64_t i) {
    return static_cast<size_t>((static_cast<int64_t>(n) * s.channels + c) * plane + i);
  };
  d.y.resize(xf.size());
  d.dx.resize(xf.size());
  d.g.resize(xf.size());
  for (int c = 0; c < s.channels; ++c) {
    double sum = 0, max_x = 0;
    for (int n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        sum += xf[at(n, c, i)];
        max_x = std::max(max_x, std::fabs(static_cast<double>(xf[at(n, c, i)])));
      }
    const double mean = sum / static_cast<double>(m);
    double squares = 0;
    for (int n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i) squares += std::pow(xf[at(n, c, i)] - mean, 2);
    const double var = squares / static_cast<double>(m);
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(kEpsilon));
    const double momentum = kMomentum, gamma = gammaf[static_cast<size_t>(c)],
                 beta = betaf[static_cast<size_t>(c)];
    d.mean.push_back(mean);
    d.invstd.push_back(invstd);
    d.running_mean.push_back((1 - momentum) * rmf[static_cast<size_t>(c)] + momentum * mean);
    d.running_var.push_back((1 - momentum) * rvf[static_cast<size_t>(c)] +
                            momentum * squares / static_cast<double>(m - 1));
    d.x_terms.push_back(max_x);
    d.y_terms.push_back(std::fabs(gamma) * invstd * (max_x + std::fabs(mean)) + std::fabs(beta));
    double sum_g = 0, sum_g_xhat = 0, abs_g = 0, abs_g_xhat = 0, max_g = 0, max_xhat = 0;
    for (int n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        const size_t k = at(n, c, i);
        double v = gamma * (xf[k] - mean) * invstd + beta;
        if (residual) v += (*residual)[k];
        d.y[k] = relu && v < 0 ? 0.0 : v;
        const double g = relu_output && (*relu_output)[k] <= 0.0f ? 0.0 : dyf[k];
        const double xhat = (xf[k] - mean) * invstd;
        d.g[k] = g;
        sum_g += g;
        sum_g_xhat += g * xhat;
        abs_g += std::fabs(g);
        abs_g_xhat += std::fabs(g * xhat);
        max_g = std::max(max_g, std::fabs(g));
        max_xhat = std::max(max_xhat, std::fabs(xhat));
      }
    d.dbeta.push_back(sum_g);
    d.dgamma.push_back(sum_g_xhat);
    d.sum_terms_g.push_back(abs_g);
    d.sum_terms_gxhat.push_back(abs_g_xhat);
    d.dx_terms.push_back(std::fabs(gamma) * invstd * max_g * (2.0 + max_xhat * max_xhat));
    for (int n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        const size_t k = at(n, c, i);
        const double xhat = (xf[k] - mean) * invstd;
        d.dx[k] = gamma * invstd *
                  (d.g[k] - sum_g / static_cast<double>(m) - xhat * sum_g_xhat / m);
      }
  }
  return d;
}

std::vector<float> relu_of_sum(const std::vector<float>& y, const std::vector<float>* residual,
                               bool relu) {
  std::vector<float> out(y);
  if (residual) cpu::add<float>(static_cast<int64_t>(y.size()), out.data(), residual->data(),
                                out.data());
  if (relu) cpu::relu_forward<float>(static_cast<int64_t>(y.size()), out.data(), out.data());
  return out;
}

// Float arithmetic over a channel's values, against the exact result: a few units of float's
// roundoff (2^-24) of the magnitudes involved, with room for the short float sums of the tree.
constexpr double kRel = 1e-5;

struct Case {
  Shape shape;
  double offset;  // added to x: a one-pass variance would lose its precision to it
};

// Small channels (n / (n - 1) far from 1 shows a biased running variance), odd channel counts,
// planes no vector divides, splits > 1, tiles of NHWC that C does not fill.
const Case kCases[] = {
    {{4, 3, 5, 7}, 0.0},    {{2, 16, 1, 1}, 0.0},    {{3, 8, 2, 2}, 3.0},
    {{2, 17, 3, 3}, -1.0},  {{8, 64, 14, 14}, 1.0},  {{2, 4, 33, 31}, -2.0},
    {{2, 6, 5, 6}, 0.5},    {{3, 72, 4, 4}, 0.0},    {{32, 2, 32, 32}, 10.0},
    {{4, 128, 7, 7}, 0.0},
};

template <bool ChannelsLast, int V>
void check_case(const Case& k, int variant) {
  const Shape& s = k.shape;
  const bn::Partition p = partition_of(s, ChannelsLast);
  CAPTURE(describe(s, ChannelsLast, V));
  CAPTURE(variant);
  const bool use_residual = variant & 1, relu = variant & 2;
  Rng rng(derive_seed(s.count() * 4 + static_cast<size_t>(variant), "batchnorm math"));
  auto x = testing::random_uniform<float>(rng, s.count());
  for (float& v : x) v += static_cast<float>(k.offset);
  const auto residual = testing::random_uniform<float>(rng, s.count());
  const auto dy = testing::random_uniform<float>(rng, s.count());
  const auto gamma = testing::random_uniform<float>(rng, static_cast<size_t>(s.channels), 0.5, 1.5);
  const auto beta = testing::random_uniform<float>(rng, static_cast<size_t>(s.channels), -0.5, 0.5);
  const auto rm = testing::random_uniform<float>(rng, static_cast<size_t>(s.channels), -0.2, 0.2);
  const auto rv = testing::random_uniform<float>(rng, static_cast<size_t>(s.channels), 0.5, 1.5);
  const std::vector<float>* z = use_residual ? &residual : nullptr;

  // The replay, on the tensors as the format stores them.
  const auto xs = stored(x, s, ChannelsLast), zs = stored(residual, s, ChannelsLast),
             dys = stored(dy, s, ChannelsLast);
  const Stats stats = replay_statistics<ChannelsLast, V>(p, xs, rm, rv);
  const auto ys = replay_normalize<ChannelsLast, V>(p, xs, use_residual ? &zs : nullptr, relu,
                                                    stats.mean, stats.invstd, false, gamma, beta);
  const auto y = unstored(ys, s, ChannelsLast);
  // The backward masks by the forward's own output when the ReLU is fused.
  const Grads grads = replay_backward<ChannelsLast, V>(p, xs, dys, relu ? &ys : nullptr, gamma,
                                                       stats.mean, stats.invstd);

  // The twin in float (statistics in double inside), with the unfused add and ReLU after it.
  const cpu::BatchNormShape twin_shape{s.batch, s.channels, s.height, s.width};
  std::vector<float> twin_rm(rm), twin_rv(rv), twin_y(s.count()), twin_mean(rm.size()),
      twin_invstd(rm.size());
  cpu::batchnorm_forward_train<float>(twin_shape, x.data(), gamma.data(), beta.data(), kMomentum,
                                      kEpsilon, twin_rm.data(), twin_rv.data(), twin_y.data(),
                                      twin_mean.data(), twin_invstd.data());
  const auto twin_out = relu_of_sum(twin_y, z, relu);
  // The backward's mask comes from the replay's output, so that an output that rounds to the
  // other side of zero in one of the two cannot make them differ by a whole gradient.
  std::vector<float> twin_g(dy);
  if (relu) cpu::relu_backward<float>(static_cast<int64_t>(dy.size()), y.data(), dy.data(),
                                      twin_g.data());
  std::vector<float> twin_dx(s.count()), twin_dgamma(rm.size()), twin_dbeta(rm.size());
  cpu::batchnorm_backward<float>(twin_shape, x.data(), twin_g.data(), gamma.data(),
                                 twin_mean.data(), twin_invstd.data(), twin_dx.data(),
                                 twin_dgamma.data(), twin_dbeta.data());

  // The direct double computation, masking by the same output the replay masked by.
  const Direct d = direct(s, x, gamma, beta, rm, rv, z, relu, dy, relu ? &y : nullptr);

  const int64_t plane = s.plane();
  const std::vector<double> no_terms(static_cast<size_t>(s.channels), 0.0);
  for (const auto& [name, want] :
       {std::pair{"twin", widened(twin_out)}, std::pair{"direct", d.y}})
    check_close(std::string("y vs ") + name, y, want, d.y_terms, plane, kRel);
  check_close("mean vs twin", stats.mean, widened(twin_mean), d.x_terms, 1, kRel);
  check_close("mean vs direct", stats.mean, d.mean, d.x_terms, 1, kRel);
  check_close("invstd vs twin", stats.invstd, widened(twin_invstd), no_terms, 1, kRel);
  check_close("invstd vs direct", stats.invstd, d.invstd, no_terms, 1, kRel);
  check_close("running_mean vs twin", stats.running_mean, widened(twin_rm), d.x_terms, 1, kRel);
  check_close("running_mean vs direct", stats.running_mean, d.running_mean, d.x_terms, 1, kRel);
  check_close("running_var vs twin", stats.running_var, widened(twin_rv), no_terms, 1, kRel);
  check_close("running_var vs direct", stats.running_var, d.running_var, no_terms, 1, kRel);

  CHECK(testing::bitwise_equal(unstored(grads.masked_dy, s, ChannelsLast),
                               std::vector<float>(d.g.begin(), d.g.end())));
  check_close("dx vs twin", unstored(grads.dx, s, ChannelsLast), widened(twin_dx), d.dx_terms,
              plane, kRel);
  check_close("dx vs direct", unstored(grads.dx, s, ChannelsLast), d.dx, d.dx_terms, plane, kRel);
  check_close("dgamma vs twin", grads.dgamma, widened(twin_dgamma), d.sum_terms_gxhat, 1, kRel);
  check_close("dgamma vs direct", grads.dgamma, d.dgamma, d.sum_terms_gxhat, 1, kRel);
  check_close("dbeta vs twin", grads.dbeta, widened(twin_dbeta), d.sum_terms_g, 1, kRel);
  check_close("dbeta vs direct", grads.dbeta, d.dbeta, d.sum_terms_g, 1, kRel);

  // Evaluation mode with the updated running statistics, against the twin's.
  const auto eval_s = replay_normalize<ChannelsLast, V>(
      p, xs, use_residual ? &zs : nullptr, relu, stats.running_mean, stats.running_var, true,
      gamma, beta);
  std::vector<float> twin_eval(s.count());
  cpu::batchnorm_forward_eval<float>(twin_shape, x.data(), gamma.data(), beta.data(),
                                     stats.running_mean.data(), stats.running_var.data(),
                                     kEpsilon, twin_eval.data());
  check_close("eval y vs twin", unstored(eval_s, s, ChannelsLast),
              widened(relu_of_sum(twin_eval, z, relu)), d.y_terms, plane, kRel);
}

// The vector widths the kernels would choose for this shape (16 and 8 bytes of float and of a
// 16-bit type), and single values.
std::vector<int> widths_for(const bn::Partition& p) {
  std::vector<int> widths{1};
  for (int v : {8, 4, 2})
    if (bn::widest_vector(p, v) == v) widths.push_back(v);
  return widths;
}

}  // namespace

TEST_CASE("every value is read by exactly one thread, of the block and lane of its channel") {
  const Shape shapes[] = {{4, 3, 5, 7},  {2, 16, 1, 1}, {2, 17, 3, 3},  {3, 72, 4, 4},
                          {2, 6, 5, 6},  {1, 1, 1, 2},  {64, 64, 8, 8}, {5, 200, 3, 1},
                          {1, 1, 150, 150}};
  for (const Shape& s : shapes)
    for (bool channels_last : {false, true}) {
      const bn::Partition p = partition_of(s, channels_last);
      for (int vector : widths_for(p)) {
        CAPTURE(describe(s, channels_last, vector));
        const bn::BlockShape shape = bn::block_shape(p, vector);
        REQUIRE(shape.lanes * shape.rows == bn::kThreads);
        REQUIRE(p.splits >= 1);
        REQUIRE(p.splits <= bn::kTargetBlocks);
        std::vector<int> hits(s.count(), 0);
        size_t wrong_channel = 0;
        dispatch(channels_last, vector, [&](auto layout, auto width) {
          constexpr bool kChannelsLast = decltype(layout)::value;
          constexpr int V = decltype(width)::value;
          for_each_thread(p, V, [&](int group, int split, int lane, int row) {
            walk_thread<kChannelsLast, V>(
                p, group, split, lane, row, [&](const auto& loads) {
                  for (int u = 0; u < std::decay_t<decltype(loads)>::kCount; ++u)
                    for (int k = 0; k < V; ++k) {
                      const int64_t i = loads.offset[u] + k;
                      REQUIRE(i >= 0);
                      REQUIRE(i < static_cast<int64_t>(s.count()));
                      ++hits[static_cast<size_t>(i)];
                      const int64_t channel =
                          kChannelsLast ? i % s.channels : i / s.plane() % s.channels;
                      const int want = kChannelsLast ? bn::nhwc_first_channel(p, group, lane, V) +
                                                           bn::slot_of<kChannelsLast, V>(k)
                                                     : group;
                      wrong_channel += channel != want;
                    }
                });
          });
        });
        CHECK(wrong_channel == 0);
        CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<long>(hits.size()));
      }
    }
}

TEST_CASE("a plane cursor advanced step by step agrees with division") {
  for (int64_t plane_vectors : {1, 2, 3, 7, 49, 196, 256, 300, 1568}) {
    const bn::PlaneCursor step = bn::cursor_step(bn::kThreads, plane_vectors);
    for (int64_t start : {int64_t{0}, int64_t{5}, plane_vectors - 1, int64_t{1000}}) {
      if (start < 0) continue;
      bn::PlaneCursor at = bn::cursor_at(start, plane_vectors);
      for (int64_t i = start; i < start + 100 * bn::kThreads; i += bn::kThreads) {
        REQUIRE(at.image == i / plane_vectors);
        REQUIRE(at.vector == i % plane_vectors);
        bn::advance(at, step, plane_vectors);
      }
    }
  }
}

TEST_CASE("partitions: ResNet-18's shapes fill about kTargetBlocks blocks; scratch fits them") {
  struct Layer {
    int batch, channels, size;
  };
  // 224x224 at batch 256 and the cifar stem's 32x32 at batch 128.
  for (const Layer& l : {Layer{256, 64, 112}, Layer{256, 64, 56}, Layer{256, 128, 28},
                         Layer{256, 256, 14}, Layer{256, 512, 7}, Layer{128, 64, 32},
                         Layer{128, 128, 16}, Layer{128, 256, 8}, Layer{128, 512, 4}})
    for (bool channels_last : {false, true}) {
      CAPTURE(l.channels);
      CAPTURE(l.size);
      CAPTURE(channels_last);
      const bn::Partition p =
          bn::make_partition(l.batch, l.channels, l.size, l.size, channels_last);
      const int64_t blocks = static_cast<int64_t>(p.channel_groups) * p.splits;
      CHECK(blocks >= 128);  // every layer keeps an H100's 132 SMs busy...
      CHECK(blocks <= 2 * bn::kTargetBlocks);
      // ...and no block reads less than kMinValuesPerBlock values (or there is one split).
      CHECK((p.splits == 1 ||
             p.per_channel * p.tile_channels / p.splits >= bn::kMinValuesPerBlock));
      const cuda::BatchNormShape shape{l.batch, l.channels, l.size, l.size,
                                       channels_last ? MemoryFormat::nhwc : MemoryFormat::nchw};
      const size_t bytes = cuda::batchnorm_scratch_bytes(shape);
      CHECK(bytes == static_cast<size_t>(bn::kPartialArrays) * sizeof(float) *
                         static_cast<size_t>(l.channels) * static_cast<size_t>(p.splits));
      CHECK(bytes <= size_t{1} << 20);
    }
}

TEST_CASE("the launchers refuse a single value per channel and empty dimensions") {
  CHECK_THROWS_AS(cuda::check_batchnorm_trainable({1, 8, 1, 1, MemoryFormat::nhwc}), Error);
  CHECK_NOTHROW(cuda::check_batchnorm_trainable({2, 8, 1, 1, MemoryFormat::nhwc}));
  CHECK_NOTHROW(cuda::check_batchnorm_trainable({1, 8, 1, 2, MemoryFormat::nchw}));
  CHECK_THROWS_AS(cuda::batchnorm_scratch_bytes({0, 8, 4, 4, MemoryFormat::nchw}), Error);
  CHECK_THROWS_AS(cuda::batchnorm_scratch_bytes({2, 8, 4, 0, MemoryFormat::nchw}), Error);
}

TEST_CASE("merged moments: empty parts, and any order of merging agrees with float64") {
  // Empty parts merge exactly and make no 0 / 0.
  const bn::Moments<float> empty{0, 0, 0}, some{3, 2.5f, 4.0f};
  const auto a = bn::merged(empty, some), b = bn::merged(some, empty), c = bn::merged(empty, empty);
  CHECK((a.count == 3 && a.mean == 2.5f && a.m2 == 4.0f));
  CHECK((b.count == 3 && b.mean == 2.5f && b.m2 == 4.0f));
  CHECK((c.count == 0 && c.mean == 0 && c.m2 == 0));

  // A million values far from zero (mean 1000, spread 1), in parts of uneven sizes merged left to
  // right and as a tree: mean and variance within a few float roundoffs of float64's, where
  // sum(x^2) / n - mean^2 in float would lose every digit of the variance.
  Rng rng(7);
  std::vector<float> values(1 << 20);
  for (float& v : values) v = static_cast<float>(1000.0 + rng.uniform(-1.7, 1.7));
  double sum = 0;
  for (float v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (float v : values) squares += (v - mean) * (v - mean);
  std::vector<bn::Moments<float>> parts;
  for (size_t begin = 0, size = 1; begin < values.size(); begin += size, size = size % 997 + 1) {
    const size_t end = std::min(values.size(), begin + size);
    bn::Moments<float> part{0, 0, 0};
    for (size_t i = begin; i < end; ++i)
      part = bn::merged(part, bn::Moments<float>{1, values[i], 0});
    parts.push_back(part);
  }
  bn::Moments<float> left{0, 0, 0};
  for (const auto& part : parts) left = bn::merged(left, part);
  std::vector<bn::Moments<float>> tree(parts);
  while (tree.size() > 1) {
    std::vector<bn::Moments<float>> next;
    for (size_t i = 0; i < tree.size(); i += 2)
      next.push_back(i + 1 < tree.size() ? bn::merged(tree[i], tree[i + 1]) : tree[i]);
    tree = next;
  }
  for (const auto& total : {left, tree[0]}) {
    CHECK(total.count == static_cast<float>(values.size()));
    CHECK(std::fabs(total.mean - mean) <= 1e-6 * mean);
    CHECK(std::fabs(total.m2 - squares) <= 1e-4 * squares);
  }
}

TEST_CASE("group moments are the two-pass mean and sum of squared deviations") {
  const float values[4] = {1.0f, 2.0f, 4.0f, 9.0f};
  float mean = 0, m2 = 0;
  bn::group_moments(values, mean, m2);
  CHECK(mean == 4.0f);
  CHECK(m2 == 9.0f + 4.0f + 0.0f + 25.0f);
  // Channels sharing a count: two slots of two values each.
  auto s = bn::no_moments<float, 2>();
  const float first[2][2] = {{1.0f, 3.0f}, {10.0f, 10.0f}};
  const float second[2][2] = {{5.0f, 7.0f}, {-10.0f, -10.0f}};
  bn::add_group(s, first);
  bn::add_group(s, second);
  CHECK(s.count == 4.0f);
  CHECK(s.mean[0] == 4.0f);
  CHECK(s.m2[0] == 9.0f + 1.0f + 1.0f + 9.0f);
  CHECK(s.mean[1] == 0.0f);
  CHECK(s.m2[1] == 400.0f);
}

TEST_CASE("ReLU and its mask pass NaN and -0.0 as torch does; no residual keeps -0.0") {
  CHECK(std::signbit(bn::relu(-0.0f)));
  CHECK(std::isnan(bn::relu(kNaN)));
  CHECK(bn::relu(-1.0f) == 0.0f);
  CHECK(bn::relu_masked(3.0f, kNaN) == 3.0f);
  CHECK(bn::relu_masked(3.0f, -0.0f) == 0.0f);
  CHECK(bn::relu_masked(3.0f, 0.0f) == 0.0f);
  CHECK(bn::relu_masked(3.0f, 1e-30f) == 3.0f);
  // (x - mean) * scale = 0 * -2 = -0.0, and -0.0 + beta (-0.0) stays -0.0.
  const bn::Normalize<float> n = bn::make_normalize(1.0f, 2.0f, -1.0f, -0.0f);
  CHECK(std::signbit(bn::forward_output(n, 1.0f, false, 0.0f, false)));
  CHECK(!std::signbit(bn::forward_output(n, 1.0f, true, 0.0f, false)));
}

TEST_CASE("the kernels' maths in their order matches the twin and float64, both formats") {
  int variant = 0;
  for (const Case& k : kCases)
    for (bool channels_last : {false, true}) {
      const bn::Partition p = partition_of(k.shape, channels_last);
      for (int vector : widths_for(p)) {
        // plain, residual, relu, residual + relu, in turn
        dispatch(channels_last, vector, [&](auto layout, auto width) {
          check_case<decltype(layout)::value, decltype(width)::value>(k, variant % 4);
        });
        ++variant;
      }
    }
}

TEST_CASE("a channel of 3.2 million values (ResNet-18's stem at 224x224, batch 256)") {
  // One channel only, to keep CI quick; the partition is that of any channel count for NCHW, and
  // for NHWC the same rows split the same way.
  const Case big{{256, 1, 112, 112}, 5.0};
  check_case<false, 4>(big, 3);
  check_case<true, 1>(big, 0);
}
