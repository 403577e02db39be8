#pragma once
// Our BatchNorm kernels (cuda/batchnorm_kernels.h) against the CPU twin run in double on the same
// inputs (src/cpu/batchnorm.cpp, the residual and ReLU applied after it in double), shared by the
// GPU test (tests/gpu/test_cuda_batchnorm_kernels.cpp, which adds cuDNN) and the emulated one
// (tests/emu/test_emulated_batchnorm.cpp, which runs the same kernel source on the CPU). Every
// output is poisoned first; a second run of the same calls must give the same bits.
//
// Bounds: kRel of (|want| + the magnitude of the terms the result was computed from) for the
// float arithmetic over a channel, as test_cuda_layers.cpp allows cuDNN's BatchNorm, plus two
// roundings of the activation type for a result stored in it (the inputs are rounded to it
// before the reference sees them, so they carry no error of their own).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <initializer_list>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/memory_format.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/layout_copies.h"
#include "support/parallel_loops.h"
#include "support/test_tensors.h"

namespace rddp::testing::batchnorm_check {

using cuda::DeviceBuffer;

inline constexpr double kRel = 1e-5;

template <typename T>
struct Type;
template <>
struct Type<float> {
  static constexpr const char* kName = "float";
  static constexpr double kRoundoff = 0x1p-24;
};
template <>
struct Type<__nv_bfloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr double kRoundoff = 0x1p-8;  // 8 significant bits, rounded to nearest
};
template <>
struct Type<__half> {
  static constexpr const char* kName = "float16";
  static constexpr double kRoundoff = 0x1p-11;
};

struct Case {
  cpu::BatchNormShape shape;
  double offset;  // added to x: a one-pass variance would lose its precision to it
};

// The odd shapes every run of the checks starts with, then the caller's (ResNet-18's, at the
// batches that run may afford).
inline std::vector<Case> odd_shapes_then(std::initializer_list<Case> more) {
  std::vector<Case> cases = {
      {{4, 3, 5, 7}, 0.0},       // 3 channels, an odd plane: one value a load in both formats
      {{2, 17, 3, 3}, -1.0},     // 17 channels: no vector divides C
      {{2, 16, 1, 1}, 0.0},      // batch 2 at 1x1: two values a channel, n / (n - 1) = 2
      {{3, 8, 2, 2}, 3.0},       // few values a channel: a biased running variance shows
      {{2, 6, 5, 6}, 0.5},       // C = 6 and a plane of 30: 8-byte loads of float only
      {{2, 4, 33, 31}, -2.0},    // odd plane of 1023
      {{3, 72, 4, 4}, 0.0},      // NHWC: a second tile with 8 of its 64 channels
      {{4, 20, 7, 7}, 0.0},      // a 7x7 plane
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}


inline size_t elements(const cpu::BatchNormShape& s) {
  return static_cast<size_t>(s.batch) * s.channels * s.height * s.width;
}

inline std::string describe(const cpu::BatchNormShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" +
         std::to_string(s.height) + "x" + std::to_string(s.width);
}

template <typename T>
std::vector<T> in_format(const std::vector<T>& nchw, const cpu::BatchNormShape& s, bool nhwc) {
  return testing::in_layout(nchw, nhwc, s.channels, s.height, s.width);
}

template <typename T>
std::vector<T> from_format(const std::vector<T>& values, const cpu::BatchNormShape& s,
                           bool nhwc) {
  return testing::from_layout(values, nhwc, s.channels, s.height, s.width);
}

inline std::ptrdiff_t signed_size(size_t size) { return static_cast<std::ptrdiff_t>(size); }

template <typename T>
std::vector<T> narrowed(const std::vector<double>& values) {
  std::vector<T> out(values.size());
  const std::ptrdiff_t count = signed_size(values.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = static_cast<T>(static_cast<float>(values[i]));
  return out;
}

template <typename T>
std::vector<double> widened(const std::vector<T>& values) {
  std::vector<double> out(values.size());
  const std::ptrdiff_t count = signed_size(values.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

// relu?(y + residual?), in double.
inline std::vector<double> activated(std::vector<double> y, const std::vector<double>* residual,
                              bool relu) {
  const std::ptrdiff_t count = signed_size(y.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    if (residual) y[i] += (*residual)[i];
    if (relu && y[i] < 0) y[i] = 0;
  }
  return y;
}

// Worst error / bound of each result, for the summary.
class Ledger {
 public:
  void note(const std::string& what, double ratio) {
    double& worst = worst_[what];
    worst = std::max(worst, ratio);
  }
  std::string summary() const {
    std::ostringstream out;
    for (const auto& [what, ratio] : worst_) out << " " << what << " " << ratio;
    return out.str();
  }

 private:
  std::map<std::string, double> worst_;
};

// Each element of got within its bound (a NaN fails): CHECK when strict, else WARN. Notes the
// worst error / bound.
inline void compare(const std::string& what, const std::vector<double>& got,
             const std::vector<double>& want, const std::vector<double>& bound, Ledger& ledger,
             bool strict = true) {
  REQUIRE(got.size() == want.size());
  const std::ptrdiff_t count = signed_size(want.size());
  std::ptrdiff_t failed = 0;
  double worst = 0;
  // Counted in parallel; the first three misses are reported after, in index order, from the
  // calling thread (doctest's assertions are not for worker threads).
#pragma omp parallel for schedule(static) reduction(+ : failed) reduction(max : worst) \
    if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    const double error = std::fabs(got[i] - want[i]);
    if (error <= bound[i]) {
      if (bound[i] > 0) worst = std::max(worst, error / bound[i]);
      continue;
    }
    ++failed;
    worst = std::max(worst, std::isnan(error) ? INFINITY : error / bound[i]);
  }
  for (std::ptrdiff_t i = 0, shown = 0; i < count && shown < std::min<std::ptrdiff_t>(failed, 3);
       ++i) {
    if (std::fabs(got[i] - want[i]) <= bound[i]) continue;
    ++shown;
    if (strict)
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                      << bound[i]);
    else
      MESSAGE("WARNING: " << what << "[" << i << "] = " << got[i] << ", expected " << want[i]
                          << " within " << bound[i]);
  }
  if (strict)
    CHECK_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " off");
  else
    WARN_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " off");
  ledger.note(what, worst);
}

// unit * |want| + kRel * (|want| + terms[channel]), `run` adjacent NCHW elements a channel.
inline std::vector<double> bounds(const std::vector<double>& want, const std::vector<double>& terms,
                           size_t run, double unit) {
  std::vector<double> bound(want.size());
  const std::ptrdiff_t count = signed_size(want.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i)
    bound[i] = unit * std::fabs(want[i]) +
               kRel * (std::fabs(want[i]) + terms[static_cast<size_t>(i) / run % terms.size()]);
  return bound;
}

// body(c, i) for every NCHW element i of channel c, in index order within each channel, the
// channels spread over the cores: what body accumulates per channel is summed in the same order
// as by one loop over i.
template <typename Body>
void for_each_channel(const cpu::BatchNormShape& s, const Body& body) {
  const size_t plane = static_cast<size_t>(s.height) * s.width;
#pragma omp parallel for schedule(static) \
    if (static_cast<std::ptrdiff_t>(elements(s)) >= kParallelElements)
  for (int c = 0; c < s.channels; ++c)
    for (int n = 0; n < s.batch; ++n) {
      const size_t start = (static_cast<size_t>(n) * s.channels + c) * plane;
      for (size_t i = start; i < start + plane; ++i) body(c, i);
    }
}

// The inputs of one case in one activation type, held as the float values of that type.
struct Inputs {
  std::vector<double> x, residual, dy;  // NCHW, each exactly a value of the type
  std::vector<float> gamma, beta, running_mean, running_var;
};

// The twin's training forward, and the magnitudes the results are computed from.
struct ForwardReference {
  std::vector<double> y, mean, invstd, running_mean, running_var;
  std::vector<double> x_terms, y_terms, none;
};

inline ForwardReference forward_reference(const cpu::BatchNormShape& s, const Inputs& in) {
  ForwardReference r;
  const std::vector<double> gamma(in.gamma.begin(), in.gamma.end()),
      beta(in.beta.begin(), in.beta.end());
  r.running_mean.assign(in.running_mean.begin(), in.running_mean.end());
  r.running_var.assign(in.running_var.begin(), in.running_var.end());
  r.y.resize(in.x.size());
  r.mean.resize(gamma.size());
  r.invstd.resize(gamma.size());
  cpu::batchnorm_forward_train<double>(s, in.x.data(), gamma.data(), beta.data(),
                                       cuda::kBatchNormMomentum, cuda::kBatchNormEpsilon,
                                       r.running_mean.data(), r.running_var.data(), r.y.data(),
                                       r.mean.data(), r.invstd.data());
  r.x_terms.assign(gamma.size(), 0.0);
  r.none.assign(gamma.size(), 0.0);
  for_each_channel(s, [&](int c, size_t i) {
    r.x_terms[c] = std::max(r.x_terms[c], std::fabs(in.x[i]));
  });
  for (size_t c = 0; c < gamma.size(); ++c)
    r.y_terms.push_back(std::fabs(gamma[c]) * r.invstd[c] * (r.x_terms[c] + std::fabs(r.mean[c])) +
                        std::fabs(beta[c]));
  return r;
}

struct BackwardReference {
  std::vector<double> dx, dgamma, dbeta;
  std::vector<double> dx_terms, dgamma_terms, dbeta_terms;
};

inline BackwardReference backward_reference(const cpu::BatchNormShape& s, const Inputs& in,
                                     const ForwardReference& f, const std::vector<double>& g) {
  BackwardReference r;
  const std::vector<double> gamma(in.gamma.begin(), in.gamma.end());
  r.dx.resize(in.x.size());
  r.dgamma.resize(gamma.size());
  r.dbeta.resize(gamma.size());
  cpu::batchnorm_backward<double>(s, in.x.data(), g.data(), gamma.data(), f.mean.data(),
                                  f.invstd.data(), r.dx.data(), r.dgamma.data(), r.dbeta.data());
  std::vector<double> max_g(gamma.size(), 0.0), max_xhat(gamma.size(), 0.0);
  r.dgamma_terms.assign(gamma.size(), 0.0);
  r.dbeta_terms.assign(gamma.size(), 0.0);
  for_each_channel(s, [&](int c, size_t i) {
    const double xhat = (in.x[i] - f.mean[c]) * f.invstd[c];
    max_g[c] = std::max(max_g[c], std::fabs(g[i]));
    max_xhat[c] = std::max(max_xhat[c], std::fabs(xhat));
    r.dgamma_terms[c] += std::fabs(g[i] * xhat);
    r.dbeta_terms[c] += std::fabs(g[i]);
  });
  for (size_t c = 0; c < gamma.size(); ++c)
    r.dx_terms.push_back(std::fabs(gamma[c]) * f.invstd[c] * max_g[c] *
                         (2.0 + max_xhat[c] * max_xhat[c]));
  return r;
}

// Where the backward finds the mask of a fused ReLU: y read back (ReluMask::of_output), y
// recomputed from x (ReluMask::recomputed; without a residual only), or the bits the forward
// wrote (ReluMask::of_bits).
enum class MaskSource { output, recomputed, bits };

inline std::string to_string(MaskSource m) {
  return m == MaskSource::output ? "output" : m == MaskSource::recomputed ? "recomputed" : "bits";
}

// How one run uses the API: the fused parts, and which buffers alias.
struct Variant {
  bool residual, relu;
  // 0: every output separate, masked_dy written to its own buffer;
  // 1: y written over the residual, dx over dy, evaluation's y over its x; no masked_dy;
  // 2: masked_dy written over dy.
  int aliasing;
  MaskSource mask;  // output where there is no ReLU
};

// The turn-th run's variant: the fusions (4) and aliasings (3) in turn, and under a ReLU the
// mask's sources in rounds of four turns: read, recomputed (bits under a residual), bits. The
// aliasing steps one further every 12 turns, so that within 36 each source meets each aliasing.
inline Variant variant_of(int turn) {
  const bool residual = turn % 4 == 1 || turn % 4 == 3, relu = turn % 4 >= 2;
  const int round = turn / 4 % 3;
  const MaskSource mask = !relu || round == 0             ? MaskSource::output
                          : round == 1 && !residual       ? MaskSource::recomputed
                                                          : MaskSource::bits;
  return {residual, relu, (turn + turn / 12) % 3, mask};
}

// The shift a run of `v` takes when asked for `shift`: the ReLU's bits are written and read a
// byte a load of the shape's widest loads, which 16-byte aligned pointers give (0).
inline size_t shift_of(const Variant& v, size_t shift) {
  return v.mask == MaskSource::bits ? 0 : shift;
}

template <typename T>
struct Outputs {
  std::vector<T> y, dx, masked_dy, eval_y;  // as stored
  std::vector<float> save_mean, save_invstd, running_mean, running_var, dgamma, dbeta;
};

// The per-channel float buffers of one BatchNorm run, ours or cuDNN's: gamma, beta and the
// running statistics from `in`; the saved statistics and the parameter gradients poisoned until
// the run writes them.
struct ChannelBuffers {
  ChannelBuffers(const Inputs& in, cudaStream_t stream)
      : gamma(to_device(in.gamma, stream)),
        beta(to_device(in.beta, stream)),
        running_mean(to_device(in.running_mean, stream)),
        running_var(to_device(in.running_var, stream)),
        save_mean(poisoned<float>(in.gamma.size(), stream)),
        save_invstd(poisoned<float>(in.gamma.size(), stream)),
        dgamma(poisoned<float>(in.gamma.size(), stream)),
        dbeta(poisoned<float>(in.gamma.size(), stream)) {}

  // The run's per-channel results, into `out`.
  template <typename T>
  void read_into(Outputs<T>& out, cudaStream_t stream) const {
    out.save_mean = to_host(save_mean, stream);
    out.save_invstd = to_host(save_invstd, stream);
    out.running_mean = to_host(running_mean, stream);
    out.running_var = to_host(running_var, stream);
    out.dgamma = to_host(dgamma, stream);
    out.dbeta = to_host(dbeta, stream);
  }

  DeviceBuffer<float> gamma, beta, running_mean, running_var;
  DeviceBuffer<float> save_mean, save_invstd, dgamma, dbeta;
};

// Our kernels: training forward, backward (masked by the forward's output when the ReLU is
// fused) and evaluation with the updated running statistics. Every activation (x, residual, y,
// dy, dx, masked_dy, evaluation's y) starts `shift` elements past the start of its allocation:
// a shift that leaves the pointers 8-byte or only element aligned makes the launchers take the
// narrower loads; the ReLU's bits take the widest loads only (shift_of).
template <typename T>
Outputs<T> run_ours(const cuda::BatchNormShape& shape, const Inputs& in, const Variant& v,
                    cudaStream_t stream, size_t shift = 0) {
  shift = shift_of(v, shift);
  const cpu::BatchNormShape s{shape.batch, shape.channels, shape.height, shape.width};
  const bool nhwc = shape.format == MemoryFormat::nhwc;
  const size_t count = elements(s);
  const auto x = in_format(narrowed<T>(in.x), s, nhwc);
  const auto residual = in_format(narrowed<T>(in.residual), s, nhwc);
  const auto dy = in_format(narrowed<T>(in.dy), s, nhwc);
  // count + shift poisoned elements, `values` (when given) from element `shift` on.
  auto placed = [&](const std::vector<T>* values) {
    DeviceBuffer<T> device = poisoned<T>(count + shift, stream);
    if (values != nullptr) cuda::copy_to_device(device.get() + shift, values->data(), count, stream);
    return device;
  };
  const DeviceBuffer<T> d_x = placed(&x), d_residual = placed(&residual);
  DeviceBuffer<T> d_dy = placed(&dy);
  ChannelBuffers c(in, stream);
  DeviceBuffer<std::byte> scratch(cuda::batchnorm_scratch_bytes(shape));
  RDDP_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xff, scratch.bytes(), stream));

  const bool bits = v.mask == MaskSource::bits;
  REQUIRE((v.relu || v.mask == MaskSource::output));
  // Poisoned: the forward must write every byte.
  DeviceBuffer<uint8_t> relu_bits(bits ? cuda::batchnorm_relu_bits_bytes<T>(shape) : 1);
  RDDP_CUDA_CHECK(cudaMemsetAsync(relu_bits.get(), 0x5a, relu_bits.bytes(), stream));

  const bool y_over_residual = v.aliasing == 1 && v.residual;
  DeviceBuffer<T> d_y = placed(y_over_residual ? &residual : nullptr);
  T* const y = d_y.get() + shift;
  cuda::batchnorm_forward_train<T>(
      shape, d_x.get() + shift, c.gamma.get(), c.beta.get(), c.running_mean.get(),
      c.running_var.get(), c.save_mean.get(), c.save_invstd.get(),
      v.residual ? (y_over_residual ? y : d_residual.get() + shift) : nullptr, v.relu, y,
      scratch.get(), scratch.bytes(), stream, bits ? relu_bits.get() : nullptr);

  auto d_dx = placed(nullptr), d_masked = placed(nullptr);
  T* dx = (v.aliasing == 1 ? d_dy.get() : d_dx.get()) + shift;
  T* masked = v.aliasing == 0   ? d_masked.get() + shift
              : v.aliasing == 2 ? d_dy.get() + shift
                                : nullptr;
  const bool mask_recomputable = v.relu && !v.residual;  // no residual's values to recompute from
  REQUIRE((mask_recomputable || v.mask != MaskSource::recomputed));
  const cuda::ReluMask<T> mask =
      !v.relu                            ? cuda::ReluMask<T>::none()
      : v.mask == MaskSource::recomputed ? cuda::ReluMask<T>::recomputed(c.beta.get())
      : bits                             ? cuda::ReluMask<T>::of_bits(relu_bits.get())
                                         : cuda::ReluMask<T>::of_output(y);
  Outputs<T> out;
  const bool y_unread = v.relu && v.mask != MaskSource::output;
  if (y_unread) {
    // y read back, then poisoned with NaN, which masks nothing: a backward that read it would
    // fail the masked_dy and dx checks.
    out.y = cuda::download(y, count, stream);
    RDDP_CUDA_CHECK(cudaMemsetAsync(y, 0xff, count * sizeof(T), stream));
  }
  cuda::batchnorm_backward<T>(shape, d_x.get() + shift, d_dy.get() + shift, mask, c.gamma.get(),
                              c.save_mean.get(), c.save_invstd.get(), dx, c.dgamma.get(),
                              c.dbeta.get(), scratch.get(), scratch.bytes(), stream, masked);

  DeviceBuffer<T> d_eval = placed(v.aliasing == 1 ? &x : nullptr);
  T* const eval_y = d_eval.get() + shift;
  cuda::batchnorm_forward_eval<T>(shape, v.aliasing == 1 ? eval_y : d_x.get() + shift,
                                  c.gamma.get(), c.beta.get(), c.running_mean.get(),
                                  c.running_var.get(),
                                  v.residual ? d_residual.get() + shift : nullptr, v.relu, eval_y,
                                  stream);

  if (!y_unread) out.y = cuda::download(y, count, stream);
  out.dx = cuda::download(dx, count, stream);
  if (masked) out.masked_dy = cuda::download(masked, count, stream);
  out.eval_y = cuda::download(eval_y, count, stream);
  c.read_into(out, stream);
  return out;
}

template <typename T>
bool same_bits(const Outputs<T>& a, const Outputs<T>& b) {
  return bitwise_equal(a.y, b.y) && bitwise_equal(a.dx, b.dx) &&
         bitwise_equal(a.masked_dy, b.masked_dy) && bitwise_equal(a.eval_y, b.eval_y) &&
         bitwise_equal(a.save_mean, b.save_mean) && bitwise_equal(a.save_invstd, b.save_invstd) &&
         bitwise_equal(a.running_mean, b.running_mean) &&
         bitwise_equal(a.running_var, b.running_var) && bitwise_equal(a.dgamma, b.dgamma) &&
         bitwise_equal(a.dbeta, b.dbeta);
}

inline std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// What check_ours found, for checks that compare other implementations with ours.
template <typename T>
struct OursChecked {
  Outputs<T> got;
  std::vector<double> y;  // got.y in NCHW, widened
  std::vector<T> g;       // dy masked by got.y where the ReLU is fused, NCHW
  BackwardReference b;    // the twin's backward of g
};

// Our kernels against the twin on one case, format and variant, and a second run for the bits.
// The caller CAPTUREs what identifies the run.
template <typename T>
OursChecked<T> check_ours(const cpu::BatchNormShape& s, const Inputs& in,
                          const ForwardReference& f, MemoryFormat format, const Variant& v,
                          cudaStream_t stream, Ledger& ours, size_t shift = 0) {
  const bool nhwc = format == MemoryFormat::nhwc;
  const cuda::BatchNormShape shape{s.batch, s.channels, s.height, s.width, format};
  const double unit = 2 * Type<T>::kRoundoff;
  const size_t plane = static_cast<size_t>(s.height) * s.width;
  OursChecked<T> r;
  Outputs<T>& got = r.got;

  got = run_ours<T>(shape, in, v, stream, shift);
  CHECK_MESSAGE(same_bits(got, run_ours<T>(shape, in, v, stream, shift)),
                "a second run of the same calls gave other bits");

  // Forward.
  const std::vector<double>* residual = v.residual ? &in.residual : nullptr;
  const auto want_y = activated(f.y, residual, v.relu);
  r.y = widened(from_format(got.y, s, nhwc));
  compare("y", r.y, want_y, bounds(want_y, f.y_terms, plane, unit), ours);
  compare("save_mean", as_double(got.save_mean), f.mean, bounds(f.mean, f.x_terms, 1, 0), ours);
  compare("save_invstd", as_double(got.save_invstd), f.invstd, bounds(f.invstd, f.none, 1, 0),
          ours);
  compare("running_mean", as_double(got.running_mean), f.running_mean,
          bounds(f.running_mean, f.x_terms, 1, 0), ours);
  compare("running_var", as_double(got.running_var), f.running_var,
          bounds(f.running_var, f.none, 1, 0), ours);

  // Backward: the gradient masked by the output our forward stored, exactly.
  r.g = narrowed<T>(in.dy);
  std::vector<T>& g = r.g;
  const auto y_nchw = from_format(got.y, s, nhwc);
  if (v.relu)
    for (size_t i = 0; i < g.size(); ++i)
      if (static_cast<float>(y_nchw[i]) <= 0.0f) g[i] = static_cast<T>(0.0f);
  if (!got.masked_dy.empty())
    CHECK_MESSAGE(bitwise_equal(from_format(got.masked_dy, s, nhwc), g),
                  "masked_dy is not dy masked by the forward's output");
  r.b = backward_reference(s, in, f, widened(g));
  const BackwardReference& b = r.b;
  compare("dx", widened(from_format(got.dx, s, nhwc)), b.dx, bounds(b.dx, b.dx_terms, plane, unit),
          ours);
  compare("dgamma", as_double(got.dgamma), b.dgamma, bounds(b.dgamma, b.dgamma_terms, 1, 0),
          ours);
  compare("dbeta", as_double(got.dbeta), b.dbeta, bounds(b.dbeta, b.dbeta_terms, 1, 0), ours);

  // Evaluation with the running statistics our forward left.
  const std::vector<double> gamma(in.gamma.begin(), in.gamma.end()),
      beta(in.beta.begin(), in.beta.end());
  const auto running_mean = as_double(got.running_mean), running_var = as_double(got.running_var);
  std::vector<double> eval(in.x.size());
  cpu::batchnorm_forward_eval<double>(s, in.x.data(), gamma.data(), beta.data(),
                                      running_mean.data(), running_var.data(),
                                      cuda::kBatchNormEpsilon, eval.data());
  const auto want_eval = activated(eval, residual, v.relu);
  compare("eval y", widened(from_format(got.eval_y, s, nhwc)), want_eval,
          bounds(want_eval, f.y_terms, plane, unit), ours);
  return r;
}

// Inputs of a case rounded to T's values.
template <typename T>
Inputs inputs_of(const Case& k) {
  const cpu::BatchNormShape& s = k.shape;
  Rng rng(derive_seed(elements(s), "batchnorm kernels"));
  Inputs in;
  auto rounded = [](std::vector<double> v) { return widened(narrowed<T>(v)); };
  auto x = testing::random_uniform<double>(rng, elements(s));
  if (s.batch == 2 && s.height * s.width == 1) {
    // Two values a channel: keep them apart, so that their variance is not lost to
    // cancellation (nearly equal values are ill-conditioned on any device, not a GPU error).
    const size_t half = elements(s) / 2;
    for (size_t c = 0; c < half; ++c)
      if (std::fabs(x[c] - x[half + c]) < 0.5)
        x[half + c] = x[c] + (x[half + c] >= x[c] ? 0.5 : -0.5);
  }
  for (double& value : x) value += k.offset;
  in.x = rounded(x);
  in.residual = rounded(testing::random_uniform<double>(rng, elements(s)));
  in.dy = rounded(testing::random_uniform<double>(rng, elements(s)));
  const size_t channels = static_cast<size_t>(s.channels);
  in.gamma = testing::random_uniform<float>(rng, channels, 0.5, 1.5);
  in.beta = testing::random_uniform<float>(rng, channels, -0.5, 0.5);
  in.running_mean = testing::random_uniform<float>(rng, channels, -0.2, 0.2);
  in.running_var = testing::random_uniform<float>(rng, channels, 0.5, 1.5);
  return in;
}


}  // namespace rddp::testing::batchnorm_check
