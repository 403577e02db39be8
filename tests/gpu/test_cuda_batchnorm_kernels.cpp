// Our BatchNorm kernels (cuda/batchnorm_kernels.h) on the GPU, against the CPU twin run in double
// on the same inputs (src/cpu/batchnorm.cpp, the residual and ReLU applied after it in double)
// and against cuDNN's legacy BatchNorm (BatchNormLayer), which they replace: odd shapes and
// ResNet-18's, NCHW and NHWC, float, bfloat16 and float16, with and without the fused residual,
// ReLU and ReLU mask, in place and not. Every output is poisoned first; a second run of the same
// calls must give the same bits. The worst error of each result, as a share of what it is
// allowed, is printed per type and format, for our kernels and for cuDNN. Our kernels must meet
// the bounds everywhere; cuDNN only in float NCHW (elsewhere its misses are printed).
//
// Bounds: kRel of (|want| + the magnitude of the terms the result was computed from) for the
// float arithmetic over a channel, as test_cuda_layers.cpp allows cuDNN's BatchNorm, plus two
// roundings of the activation type for a result stored in it (the inputs are rounded to it
// before the reference sees them, so they carry no error of their own).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_batchnorm.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/layout_copies.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::bitwise_equal;
using testing::poisoned;
using testing::to_device;
using testing::to_host;

namespace {

constexpr double kRel = 1e-5;

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

const Case kCases[] = {
    {{4, 3, 5, 7}, 0.0},        // 3 channels, an odd plane: one value a load in both formats
    {{2, 17, 3, 3}, -1.0},      // 17 channels: no vector divides C
    {{2, 16, 1, 1}, 0.0},       // batch 2 at 1x1: two values a channel, n / (n - 1) = 2
    {{3, 8, 2, 2}, 3.0},        // few values a channel: a biased running variance shows
    {{2, 6, 5, 6}, 0.5},        // C = 6 and a plane of 30: 8-byte loads of float only
    {{2, 4, 33, 31}, -2.0},     // odd plane of 1023
    {{3, 72, 4, 4}, 0.0},       // NHWC: a second tile with 8 of its 64 channels
    {{4, 20, 7, 7}, 0.0},       // a 7x7 plane
    {{8, 64, 112, 112}, 1.0},   // ResNet-18 at 224x224, smaller batches: the stem
    {{16, 64, 56, 56}, 0.0},    //   layer1
    {{16, 128, 28, 28}, 0.0},   //   layer2
    {{16, 256, 14, 14}, 0.0},   //   layer3: 14x14, 8-byte loads of 16-bit NCHW
    {{16, 512, 7, 7}, 0.0},     //   layer4
    {{128, 64, 32, 32}, 0.0},   // the cifar stem at 32x32, batch 128
    {{128, 512, 4, 4}, 0.0},    // its layer4
    {{256, 2, 112, 112}, 5.0},  // 3.2 million values a channel, as the stem's at batch 256
};

size_t elements(const cpu::BatchNormShape& s) {
  return static_cast<size_t>(s.batch) * s.channels * s.height * s.width;
}

std::string describe(const cpu::BatchNormShape& s) {
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

template <typename T>
std::vector<T> narrowed(const std::vector<double>& values) {
  std::vector<T> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(static_cast<float>(values[i]));
  return out;
}

template <typename T>
std::vector<double> widened(const std::vector<T>& values) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

// relu?(y + residual?), in double.
std::vector<double> activated(std::vector<double> y, const std::vector<double>* residual,
                              bool relu) {
  for (size_t i = 0; i < y.size(); ++i) {
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
void compare(const std::string& what, const std::vector<double>& got,
             const std::vector<double>& want, const std::vector<double>& bound, Ledger& ledger,
             bool strict = true) {
  REQUIRE(got.size() == want.size());
  size_t failed = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]);
    if (error <= bound[i]) {
      if (bound[i] > 0) worst = std::max(worst, error / bound[i]);
      continue;
    }
    worst = std::max(worst, std::isnan(error) ? INFINITY : error / bound[i]);
    if (failed++ < 3) {
      if (strict)
        FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                        << bound[i]);
      else
        MESSAGE("WARNING: " << what << "[" << i << "] = " << got[i] << ", expected " << want[i]
                            << " within " << bound[i]);
    }
  }
  if (strict)
    CHECK_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " off");
  else
    WARN_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " off");
  ledger.note(what, worst);
}

// unit * |want| + kRel * (|want| + terms[channel]), `run` adjacent NCHW elements a channel.
std::vector<double> bounds(const std::vector<double>& want, const std::vector<double>& terms,
                           size_t run, double unit) {
  std::vector<double> bound(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    bound[i] = unit * std::fabs(want[i]) +
               kRel * (std::fabs(want[i]) + terms[i / run % terms.size()]);
  return bound;
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

ForwardReference forward_reference(const cpu::BatchNormShape& s, const Inputs& in) {
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
  const size_t plane = static_cast<size_t>(s.height) * s.width;
  r.x_terms.assign(gamma.size(), 0.0);
  r.none.assign(gamma.size(), 0.0);
  for (size_t i = 0; i < in.x.size(); ++i) {
    double& t = r.x_terms[i / plane % gamma.size()];
    t = std::max(t, std::fabs(in.x[i]));
  }
  for (size_t c = 0; c < gamma.size(); ++c)
    r.y_terms.push_back(std::fabs(gamma[c]) * r.invstd[c] * (r.x_terms[c] + std::fabs(r.mean[c])) +
                        std::fabs(beta[c]));
  return r;
}

struct BackwardReference {
  std::vector<double> dx, dgamma, dbeta;
  std::vector<double> dx_terms, dgamma_terms, dbeta_terms;
};

BackwardReference backward_reference(const cpu::BatchNormShape& s, const Inputs& in,
                                     const ForwardReference& f, const std::vector<double>& g) {
  BackwardReference r;
  const std::vector<double> gamma(in.gamma.begin(), in.gamma.end());
  r.dx.resize(in.x.size());
  r.dgamma.resize(gamma.size());
  r.dbeta.resize(gamma.size());
  cpu::batchnorm_backward<double>(s, in.x.data(), g.data(), gamma.data(), f.mean.data(),
                                  f.invstd.data(), r.dx.data(), r.dgamma.data(), r.dbeta.data());
  const size_t plane = static_cast<size_t>(s.height) * s.width;
  std::vector<double> max_g(gamma.size(), 0.0), max_xhat(gamma.size(), 0.0);
  r.dgamma_terms.assign(gamma.size(), 0.0);
  r.dbeta_terms.assign(gamma.size(), 0.0);
  for (size_t i = 0; i < in.x.size(); ++i) {
    const size_t c = i / plane % gamma.size();
    const double xhat = (in.x[i] - f.mean[c]) * f.invstd[c];
    max_g[c] = std::max(max_g[c], std::fabs(g[i]));
    max_xhat[c] = std::max(max_xhat[c], std::fabs(xhat));
    r.dgamma_terms[c] += std::fabs(g[i] * xhat);
    r.dbeta_terms[c] += std::fabs(g[i]);
  }
  for (size_t c = 0; c < gamma.size(); ++c)
    r.dx_terms.push_back(std::fabs(gamma[c]) * f.invstd[c] * max_g[c] *
                         (2.0 + max_xhat[c] * max_xhat[c]));
  return r;
}

// How one run uses the API: the fused parts, and which buffers alias.
struct Variant {
  bool residual, relu;
  // 0: every output separate, masked_dy written to its own buffer;
  // 1: y written over the residual, dx over dy, evaluation's y over its x; no masked_dy;
  // 2: masked_dy written over dy.
  int aliasing;
};

template <typename T>
struct Outputs {
  std::vector<T> y, dx, masked_dy, eval_y;  // as stored
  std::vector<float> save_mean, save_invstd, running_mean, running_var, dgamma, dbeta;
};

// Our kernels: training forward, backward (masked by the forward's output when the ReLU is
// fused) and evaluation with the updated running statistics.
template <typename T>
Outputs<T> run_ours(const cuda::BatchNormShape& shape, const Inputs& in, const Variant& v,
                    cudaStream_t stream) {
  const cpu::BatchNormShape s{shape.batch, shape.channels, shape.height, shape.width};
  const bool nhwc = shape.format == MemoryFormat::nhwc;
  const size_t count = elements(s), channels = static_cast<size_t>(s.channels);
  const auto x = in_format(narrowed<T>(in.x), s, nhwc);
  const auto residual = in_format(narrowed<T>(in.residual), s, nhwc);
  const auto dy = in_format(narrowed<T>(in.dy), s, nhwc);
  const DeviceBuffer<T> d_x = to_device(x, stream), d_residual = to_device(residual, stream);
  DeviceBuffer<T> d_dy = to_device(dy, stream);
  const DeviceBuffer<float> d_gamma = to_device(in.gamma, stream),
                            d_beta = to_device(in.beta, stream);
  DeviceBuffer<float> d_running_mean = to_device(in.running_mean, stream),
                      d_running_var = to_device(in.running_var, stream);
  auto d_save_mean = poisoned<float>(channels, stream),
       d_save_invstd = poisoned<float>(channels, stream),
       d_dgamma = poisoned<float>(channels, stream), d_dbeta = poisoned<float>(channels, stream);
  DeviceBuffer<std::byte> scratch(cuda::batchnorm_scratch_bytes(shape));
  RDDP_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xff, scratch.bytes(), stream));

  const bool y_over_residual = v.aliasing == 1 && v.residual;
  DeviceBuffer<T> d_y = y_over_residual ? to_device(residual, stream) : poisoned<T>(count, stream);
  cuda::batchnorm_forward_train<T>(
      shape, d_x.get(), d_gamma.get(), d_beta.get(), d_running_mean.get(), d_running_var.get(),
      d_save_mean.get(), d_save_invstd.get(),
      v.residual ? (y_over_residual ? d_y.get() : d_residual.get()) : nullptr, v.relu, d_y.get(),
      scratch.get(), scratch.bytes(), stream);

  auto d_dx = poisoned<T>(count, stream), d_masked = poisoned<T>(count, stream);
  T* dx = v.aliasing == 1 ? d_dy.get() : d_dx.get();
  T* masked = v.aliasing == 0 ? d_masked.get() : v.aliasing == 2 ? d_dy.get() : nullptr;
  cuda::batchnorm_backward<T>(shape, d_x.get(), d_dy.get(), v.relu ? d_y.get() : nullptr,
                              d_gamma.get(), d_save_mean.get(), d_save_invstd.get(), dx,
                              d_dgamma.get(), d_dbeta.get(), scratch.get(), scratch.bytes(),
                              stream, masked);

  DeviceBuffer<T> d_eval = v.aliasing == 1 ? to_device(x, stream) : poisoned<T>(count, stream);
  cuda::batchnorm_forward_eval<T>(shape, v.aliasing == 1 ? d_eval.get() : d_x.get(),
                                  d_gamma.get(), d_beta.get(), d_running_mean.get(),
                                  d_running_var.get(), v.residual ? d_residual.get() : nullptr,
                                  v.relu, d_eval.get(), stream);

  Outputs<T> out;
  out.y = to_host(d_y, stream);
  out.dx = cuda::download(dx, count, stream);
  if (masked) out.masked_dy = cuda::download(masked, count, stream);
  out.eval_y = to_host(d_eval, stream);
  out.save_mean = to_host(d_save_mean, stream);
  out.save_invstd = to_host(d_save_invstd, stream);
  out.running_mean = to_host(d_running_mean, stream);
  out.running_var = to_host(d_running_var, stream);
  out.dgamma = to_host(d_dgamma, stream);
  out.dbeta = to_host(d_dbeta, stream);
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

// cuDNN's legacy BatchNorm on the same inputs, with the gradient our backward masked.
template <typename T>
Outputs<T> run_cudnn(const cuda::ComputeContext& context, const cuda::BatchNormShape& shape,
                     const Inputs& in, const std::vector<T>& g_stored) {
  cudaStream_t stream = context.stream();
  const cpu::BatchNormShape s{shape.batch, shape.channels, shape.height, shape.width};
  const bool nhwc = shape.format == MemoryFormat::nhwc;
  const size_t count = elements(s), channels = static_cast<size_t>(s.channels);
  const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cuda::TensorDescriptorCache descriptors(cuda::data_type_of<T>(), format);
  cuda::BatchNormLayer layer(s.channels, s.height, s.width, cuda::data_type_of<T>(), format);
  layer.prepare(s.batch, descriptors);
  const DeviceBuffer<T> d_x = to_device(in_format(narrowed<T>(in.x), s, nhwc), stream),
                        d_g = to_device(g_stored, stream);
  const DeviceBuffer<float> d_gamma = to_device(in.gamma, stream),
                            d_beta = to_device(in.beta, stream);
  DeviceBuffer<float> d_running_mean = to_device(in.running_mean, stream),
                      d_running_var = to_device(in.running_var, stream);
  auto d_y = poisoned<T>(count, stream), d_dx = poisoned<T>(count, stream);
  auto d_save_mean = poisoned<float>(channels, stream),
       d_save_invstd = poisoned<float>(channels, stream),
       d_dgamma = poisoned<float>(channels, stream), d_dbeta = poisoned<float>(channels, stream);
  layer.forward_train(context.cudnn(), s.batch, d_x.get(), d_gamma.get(), d_beta.get(),
                      d_running_mean.get(), d_running_var.get(), d_y.get(), d_save_mean.get(),
                      d_save_invstd.get());
  layer.backward(context.cudnn(), s.batch, d_x.get(), d_g.get(), d_gamma.get(),
                 d_save_mean.get(), d_save_invstd.get(), d_dx.get(), d_dgamma.get(),
                 d_dbeta.get());
  Outputs<T> out;
  out.y = to_host(d_y, stream);
  out.dx = to_host(d_dx, stream);
  out.save_mean = to_host(d_save_mean, stream);
  out.save_invstd = to_host(d_save_invstd, stream);
  out.running_mean = to_host(d_running_mean, stream);
  out.running_var = to_host(d_running_var, stream);
  out.dgamma = to_host(d_dgamma, stream);
  out.dbeta = to_host(d_dbeta, stream);
  return out;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// One case in one type and format: ours against the twin, twice for the bits, and cuDNN against
// the twin and against ours.
template <typename T>
void check_run(const Case& k, const Inputs& in, const ForwardReference& f, MemoryFormat format,
               const Variant& v, const cuda::ComputeContext& context, Ledger& ours,
               Ledger& cudnn) {
  const cpu::BatchNormShape& s = k.shape;
  const bool nhwc = format == MemoryFormat::nhwc;
  CAPTURE(describe(s));
  CAPTURE(to_string(format));
  CAPTURE(v.residual);
  CAPTURE(v.relu);
  CAPTURE(v.aliasing);
  const cuda::BatchNormShape shape{s.batch, s.channels, s.height, s.width, format};
  const double unit = 2 * Type<T>::kRoundoff;
  const size_t plane = static_cast<size_t>(s.height) * s.width;
  cudaStream_t stream = context.stream();

  const Outputs<T> got = run_ours<T>(shape, in, v, stream);
  CHECK_MESSAGE(same_bits(got, run_ours<T>(shape, in, v, stream)),
                "a second run of the same calls gave other bits");

  // Forward.
  const std::vector<double>* residual = v.residual ? &in.residual : nullptr;
  const auto want_y = activated(f.y, residual, v.relu);
  const auto y = widened(from_format(got.y, s, nhwc));
  compare("y", y, want_y, bounds(want_y, f.y_terms, plane, unit), ours);
  compare("save_mean", as_double(got.save_mean), f.mean, bounds(f.mean, f.x_terms, 1, 0), ours);
  compare("save_invstd", as_double(got.save_invstd), f.invstd, bounds(f.invstd, f.none, 1, 0),
          ours);
  compare("running_mean", as_double(got.running_mean), f.running_mean,
          bounds(f.running_mean, f.x_terms, 1, 0), ours);
  compare("running_var", as_double(got.running_var), f.running_var,
          bounds(f.running_var, f.none, 1, 0), ours);

  // Backward: the gradient masked by the output our forward stored, exactly.
  const auto dy = narrowed<T>(in.dy);
  std::vector<T> g(dy);
  const auto y_nchw = from_format(got.y, s, nhwc);
  if (v.relu)
    for (size_t i = 0; i < g.size(); ++i)
      if (static_cast<float>(y_nchw[i]) <= 0.0f) g[i] = static_cast<T>(0.0f);
  if (!got.masked_dy.empty())
    CHECK_MESSAGE(bitwise_equal(from_format(got.masked_dy, s, nhwc), g),
                  "masked_dy is not dy masked by the forward's output");
  const BackwardReference b = backward_reference(s, in, f, widened(g));
  compare("dx", widened(from_format(got.dx, s, nhwc)), b.dx, bounds(b.dx, b.dx_terms, plane, unit),
          ours);
  compare("dgamma", as_double(got.dgamma), b.dgamma, bounds(b.dgamma, b.dgamma_terms, 1, 0),
          ours);
  compare("dbeta", as_double(got.dbeta), b.dbeta, bounds(b.dbeta, b.dbeta_terms, 1, 0), ours);

  // Evaluation with the running statistics our forward left.
  {
    const std::vector<double> gamma(in.gamma.begin(), in.gamma.end()),
        beta(in.beta.begin(), in.beta.end());
    const auto running_mean = as_double(got.running_mean),
               running_var = as_double(got.running_var);
    std::vector<double> eval(in.x.size());
    cpu::batchnorm_forward_eval<double>(s, in.x.data(), gamma.data(), beta.data(),
                                        running_mean.data(), running_var.data(),
                                        cuda::kBatchNormEpsilon, eval.data());
    const auto want_eval = activated(eval, residual, v.relu);
    compare("eval y", widened(from_format(got.eval_y, s, nhwc)), want_eval,
            bounds(want_eval, f.y_terms, plane, unit), ours);
  }

  // cuDNN, plain BatchNorm: against the twin, and against ours where the inputs are the same.
  // Checked strictly only in float NCHW, where test_cuda_layers.cpp holds cuDNN to the same
  // bounds; elsewhere a disagreement is printed but does not fail: no test has held cuDNN's NHWC
  // or 16-bit BatchNorm to a bound per element, and the twin, not cuDNN, is the oracle here.
  const bool strict = std::is_same_v<T, float> && !nhwc;
  const Outputs<T> theirs = run_cudnn<T>(context, shape, in, in_format(g, s, nhwc));
  const auto their_y = widened(from_format(theirs.y, s, nhwc));
  compare("y", their_y, f.y, bounds(f.y, f.y_terms, plane, unit), cudnn, strict);
  compare("save_mean", as_double(theirs.save_mean), f.mean, bounds(f.mean, f.x_terms, 1, 0),
          cudnn, strict);
  compare("save_invstd", as_double(theirs.save_invstd), f.invstd,
          bounds(f.invstd, f.none, 1, 0), cudnn, strict);
  compare("running_mean", as_double(theirs.running_mean), f.running_mean,
          bounds(f.running_mean, f.x_terms, 1, 0), cudnn, strict);
  compare("running_var", as_double(theirs.running_var), f.running_var,
          bounds(f.running_var, f.none, 1, 0), cudnn, strict);
  const auto their_dx = widened(from_format(theirs.dx, s, nhwc));
  compare("dx", their_dx, b.dx, bounds(b.dx, b.dx_terms, plane, unit), cudnn, strict);
  compare("dgamma", as_double(theirs.dgamma), b.dgamma, bounds(b.dgamma, b.dgamma_terms, 1, 0),
          cudnn, strict);
  compare("dbeta", as_double(theirs.dbeta), b.dbeta, bounds(b.dbeta, b.dbeta_terms, 1, 0), cudnn,
          strict);
  // Ours against theirs, each allowed its own bound: twice the twin's. cuDNN's y gets the
  // residual and ReLU applied after its rounding, one more rounding.
  auto twice = [](std::vector<double> bound) {
    for (double& b2 : bound) b2 *= 2;
    return bound;
  };
  const auto their_activated = activated(their_y, residual, v.relu);
  compare("ours vs cuDNN y", y, their_activated,
          twice(bounds(their_activated, f.y_terms, plane, 1.5 * unit)), cudnn, strict);
  compare("ours vs cuDNN dx", widened(from_format(got.dx, s, nhwc)), their_dx,
          twice(bounds(their_dx, b.dx_terms, plane, unit)), cudnn, strict);
  compare("ours vs cuDNN dgamma", as_double(got.dgamma), as_double(theirs.dgamma),
          twice(bounds(b.dgamma, b.dgamma_terms, 1, 0)), cudnn, strict);
  compare("ours vs cuDNN running_var", as_double(got.running_var),
          as_double(theirs.running_var), twice(bounds(f.running_var, f.none, 1, 0)), cudnn,
          strict);
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

template <typename T>
void check_type() {
  cuda::ComputeContext context;
  std::map<MemoryFormat, Ledger> ours, cudnn;
  int run = 0;
  for (const Case& k : kCases) {
    const Inputs in = inputs_of<T>(k);
    const ForwardReference f = forward_reference(k.shape, in);
    for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
      // Fusions and aliasings in turn: 4 x 3 combinations, each met in both formats.
      const Variant v{run % 4 == 1 || run % 4 == 3, run % 4 >= 2, run % 3};
      check_run<T>(k, in, f, format, v, context, ours[format], cudnn[format]);
      ++run;
    }
  }
  for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
    MESSAGE(Type<T>::kName << " " << to_string(format)
                           << ", worst error / allowed of ours:" << ours[format].summary());
    MESSAGE(Type<T>::kName << " " << to_string(format)
                           << ", worst error / allowed of cuDNN:" << cudnn[format].summary());
  }
}

}  // namespace

TEST_CASE("our BatchNorm kernels match the CPU twin and cuDNN: float") { check_type<float>(); }

TEST_CASE("our BatchNorm kernels match the CPU twin and cuDNN: bfloat16") {
  check_type<__nv_bfloat16>();
}

TEST_CASE("our BatchNorm kernels match the CPU twin and cuDNN: float16") { check_type<__half>(); }

TEST_CASE("our BatchNorm refuses one value per channel and short scratch, launching nothing") {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  const cuda::BatchNormShape single{1, 4, 1, 1, MemoryFormat::nhwc};
  CHECK_THROWS_AS(cuda::batchnorm_forward_train<float>(single, nullptr, nullptr, nullptr, nullptr,
                                                       nullptr, nullptr, nullptr, nullptr, false,
                                                       nullptr, nullptr, 0, stream),
                  Error);
  CHECK_THROWS_AS(cuda::batchnorm_backward<float>(single, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, 0, stream),
                  Error);
  const cuda::BatchNormShape shape{2, 4, 3, 3, MemoryFormat::nchw};
  DeviceBuffer<std::byte> short_scratch(cuda::batchnorm_scratch_bytes(shape) - 4);
  CHECK_THROWS_AS(cuda::batchnorm_forward_train<float>(
                      shape, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                      nullptr, false, nullptr, short_scratch.get(), short_scratch.bytes(), stream),
                  Error);
  context.synchronize();  // nothing was launched, so nothing faults
}
