// Each layer of the CUDA executor against its CPU twin (cpu/layers.h) on fresh random inputs at
// several shapes. Every output is poisoned with NaN before the layer runs and every element is
// compared, so an element the GPU forgets to write cannot pass.
//
// cuDNN and cuBLAS results are compared with the twin run in double precision, within bounds
// derived from float arithmetic (see dot_bounds and the BatchNorm cases); our own kernels
// compute the same float expressions as their twins and must match them bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cublas_check.h"
#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/conv_graph.h"
#include "resnet_ddp/cuda/cublas_linear.h"
#include "resnet_ddp/cuda/cudnn_batchnorm.h"
#include "resnet_ddp/cuda/cudnn_conv.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/layout_copies.h"
#include "support/maxpool_places.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::bitwise_equal;
using testing::to_device;
using testing::poisoned;
using testing::to_host;
using testing::window_places;

namespace {

constexpr double kUnitRoundoff = 0x1p-24;  // float's u: relative error of one rounding

std::vector<double> widened(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

std::vector<double> absolute(const std::vector<double>& values) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = std::fabs(values[i]);
  return out;
}

double max_abs(const std::vector<double>& values) {
  double m = 0.0;
  for (double v : values) m = std::max(m, std::fabs(v));
  return m;
}

// |got - want| <= bound[i] for every element (a NaN fails); reports the first failures.
void check_within(const std::string& what, const std::vector<float>& got,
                  const std::vector<double>& want, const std::vector<double>& bound) {
  REQUIRE(got.size() == want.size());
  REQUIRE(bound.size() == want.size());
  size_t failed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(got[i] - want[i]) <= bound[i]) continue;
    if (failed++ < 5)
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                      << bound[i]);
  }
  CHECK_MESSAGE(failed == 0, what << ": " << failed << " of " << want.size() << " elements off");
}

// rel * (|want[i]| + scale) for every element: a relative bound with a floor at the magnitude
// `scale` of the quantities the result was computed from.
std::vector<double> relative_bounds(const std::vector<double>& want, double rel, double scale) {
  std::vector<double> bound(want.size());
  for (size_t i = 0; i < want.size(); ++i) bound[i] = rel * (std::fabs(want[i]) + scale);
  return bound;
}

// The error allowed to a float sum of `terms` products against the exact value, given abs_dot,
// the sum of the products' magnitudes. In strict float32 the worst case is terms * u * abs_dot;
// rounding errors of random sign make it about sqrt(terms) * u * abs_dot, and we allow
// 8 * sqrt(terms) + 16 times that, plus 32 u of the tensor's largest abs_dot for Winograd and
// FFT algorithms, whose transform errors scale with a whole tile rather than one output. A term
// left out or taken twice costs about abs_dot / terms, well above the bound at our sizes.
// With TF32 each input is first rounded to a 10-bit mantissa (relative error <= 2^-11), so each
// product is off by up to 2^-10 of its magnitude: 2^-10 * abs_dot more, a rigorous bound.
std::vector<double> dot_bounds(const std::vector<double>& abs_dot, double terms, bool tf32) {
  const double largest = max_abs(abs_dot);
  std::vector<double> bound(abs_dot.size());
  for (size_t i = 0; i < abs_dot.size(); ++i) {
    bound[i] = kUnitRoundoff * ((8.0 * std::sqrt(terms) + 16.0) * abs_dot[i] + 32.0 * largest);
    if (tf32) bound[i] += 0x1p-10 * abs_dot[i];
  }
  return bound;
}

// The same bits, except that any NaN equals any NaN: arithmetic that makes a NaN (inf - inf,
// NaN + x) gives the x86 default NaN on the CPU and the canonical NaN on the GPU, and neither
// keeps payloads alike.
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return false;
  return true;
}

std::string describe(const ConvShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" +
         std::to_string(s.in_h) + "x" + std::to_string(s.in_w) + " * " +
         std::to_string(s.out_channels) + "x" + std::to_string(s.kernel) + "x" +
         std::to_string(s.kernel) + " /" + std::to_string(s.stride) + " pad " +
         std::to_string(s.pad);
}

size_t input_size(const ConvShape& s) {
  return static_cast<size_t>(s.batch) * s.in_channels * s.in_h * s.in_w;
}
size_t output_size(const ConvShape& s) {
  return static_cast<size_t>(s.batch) * s.out_channels * s.out_h() * s.out_w();
}
size_t weight_size(const ConvShape& s) {
  return static_cast<size_t>(s.out_channels) * s.in_channels * s.kernel * s.kernel;
}

// ResNet-18's convolutions in miniature (odd sizes, every stride and padding it uses) and one at
// a real width.
const ConvShape kConvShapes[] = {
    {2, 3, 17, 19, 8, 7, 2, 3},    // imagenet stem
    {3, 3, 9, 10, 8, 3, 1, 1},     // cifar stem
    {3, 8, 9, 9, 8, 3, 1, 1},      // a block's 3x3
    {2, 8, 10, 11, 16, 3, 2, 1},   // the first 3x3 of a stage
    {3, 8, 9, 10, 16, 1, 2, 0},    // a downsample
    {1, 5, 1, 1, 3, 3, 1, 1},      // a 1x1 input, all padding around it
    {4, 64, 14, 14, 64, 3, 1, 1},  // layer3-like, K = 576
};

// Forward, backward data and backward filter of one shape against the twin in double.
void check_conv(const ConvShape& s, const cuda::MathPolicy& policy, bool timed) {
  CAPTURE(describe(s));
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  Rng rng(derive_seed(static_cast<uint64_t>(s.in_channels * 1000 + s.in_h), "conv"));
  const auto x = testing::random_uniform<float>(rng, input_size(s));
  const auto w = testing::random_uniform<float>(rng, weight_size(s));
  const auto dy = testing::random_uniform<float>(rng, output_size(s));

  DeviceBuffer<float> d_x = to_device(x, stream), d_w = to_device(w, stream),
                      d_dy = to_device(dy, stream);
  DeviceBuffer<float> d_y(output_size(s)), d_dx(input_size(s)), d_dw(weight_size(s));

  cuda::ConvAlgorithmCache algorithms(policy);
  cuda::TensorDescriptorCache descriptors;
  cuda::ConvLayer layer(s, /*needs_input_grad=*/true);
  // A timed search gets the workspace its hungriest admissible candidate needs, as the executor
  // gives it; whatever it chooses must then fit that workspace.
  const size_t search_limit = size_t{256} << 20;
  const size_t search_bytes =
      timed ? layer.search_workspace_bytes(s.batch, context.cudnn(), algorithms, search_limit) : 0;
  CHECK(search_bytes <= search_limit);
  DeviceBuffer<std::byte> search_workspace(search_bytes);
  cuda::ConvSearchBuffers buffers{d_x.get(),  d_w.get(),  d_dy.get(),
                                  d_y.get(),  d_dx.get(), d_dw.get(),
                                  search_workspace.get(), search_workspace.bytes()};
  const size_t needed = layer.prepare(s.batch, context.cudnn(), algorithms, descriptors,
                                      timed ? &buffers : nullptr, search_limit);
  if (timed) CHECK(needed <= search_bytes);
  DeviceBuffer<std::byte> workspace(std::max<size_t>(needed, 1));
  const cuda::CudnnCall call{context.cudnn(), workspace.get(), workspace.bytes()};

  d_y = poisoned<float>(output_size(s), stream);
  d_dx = poisoned<float>(input_size(s), stream);
  d_dw = poisoned<float>(weight_size(s), stream);
  layer.forward(call, s.batch, d_x.get(), d_w.get(), d_y.get());
  layer.backward_data(call, s.batch, d_dy.get(), d_w.get(), d_dx.get());
  layer.backward_filter(call, s.batch, d_x.get(), d_dy.get(), d_dw.get());
  const auto y = to_host(d_y, stream), dx = to_host(d_dx, stream), dw = to_host(d_dw, stream);
  // A residual branch's backward data adds to dx (beta 1): once more onto the same dx, twice the
  // gradient. Under the graph API this is a plan of its own.
  layer.backward_data(call, s.batch, d_dy.get(), d_w.get(), d_dx.get(), 1.0f);
  const auto dx_twice = to_host(d_dx, stream);

  const auto x64 = widened(x), w64 = widened(w), dy64 = widened(dy);
  const auto ax = absolute(x64), aw = absolute(w64), ady = absolute(dy64);
  std::vector<double> want_y(y.size()), want_dx(dx.size()), want_dw(dw.size());
  std::vector<double> abs_y(y.size()), abs_dx(dx.size()), abs_dw(dw.size());
  cpu::conv2d_forward<double>(s, x64.data(), w64.data(), want_y.data());
  cpu::conv2d_forward<double>(s, ax.data(), aw.data(), abs_y.data());
  cpu::conv2d_backward_data<double>(s, dy64.data(), w64.data(), want_dx.data());
  cpu::conv2d_backward_data<double>(s, ady.data(), aw.data(), abs_dx.data());
  cpu::conv2d_backward_filter<double>(s, x64.data(), dy64.data(), want_dw.data());
  cpu::conv2d_backward_filter<double>(s, ax.data(), ady.data(), abs_dw.data());

  const double k2 = static_cast<double>(s.kernel) * s.kernel;
  const bool tf32 = policy.allow_tf32;
  check_within("y", y, want_y, dot_bounds(abs_y, s.in_channels * k2, tf32));
  check_within("dx", dx, want_dx, dot_bounds(abs_dx, s.out_channels * k2, tf32));
  std::vector<double> want_dx_twice(want_dx), bound_twice =
                                                   dot_bounds(abs_dx, s.out_channels * k2, tf32);
  for (size_t i = 0; i < want_dx_twice.size(); ++i) {
    want_dx_twice[i] *= 2.0;
    bound_twice[i] = 2.0 * bound_twice[i] + kUnitRoundoff * 2.0 * std::fabs(want_dx[i]);
  }
  check_within("dx accumulated", dx_twice, want_dx_twice, bound_twice);
  check_within("dw", dw, want_dw,
               dot_bounds(abs_dw, static_cast<double>(s.batch) * s.out_h() * s.out_w(), tf32));
}

cuda::MathPolicy strict_policy(cuda::ConvAlgorithmSearch search, bool deterministic = false,
                               cuda::ConvApi api = cuda::ConvApi::legacy) {
  cuda::MathPolicy policy{/*allow_tf32=*/false, deterministic, search};
  policy.api = api;
  return policy;
}

}  // namespace

TEST_CASE("cuDNN convolution matches the CPU twin in strict float32 (timed search)") {
  for (const ConvShape& s : kConvShapes)
    check_conv(s, strict_policy(cuda::ConvAlgorithmSearch::timed), true);
}

TEST_CASE("cuDNN convolution matches the CPU twin in strict float32 (heuristics)") {
  for (const ConvShape& s : kConvShapes)
    check_conv(s, strict_policy(cuda::ConvAlgorithmSearch::heuristic), false);
}

TEST_CASE("cuDNN convolution with TF32 stays within the TF32 rounding bound") {
  const cuda::MathPolicy tf32{true, false, cuda::ConvAlgorithmSearch::timed};
  check_conv(kConvShapes[0], tf32, true);
  check_conv(kConvShapes[6], tf32, true);
}

// Every engine configuration the graph API's heuristics list is a candidate: the plans chosen
// among them compute the same convolutions, and strict float32 admits none on tensor cores.
TEST_CASE("cuDNN graph-API convolution matches the CPU twin in strict float32 (timed and heuristic)") {
  for (const ConvShape& s : kConvShapes) {
    check_conv(s, strict_policy(cuda::ConvAlgorithmSearch::timed, false, cuda::ConvApi::graph),
               true);
    check_conv(s,
               strict_policy(cuda::ConvAlgorithmSearch::heuristic, false, cuda::ConvApi::graph),
               false);
  }
}

TEST_CASE("cuDNN graph-API convolution with TF32 stays within the TF32 rounding bound") {
  cuda::MathPolicy tf32{true, false, cuda::ConvAlgorithmSearch::timed};
  tf32.api = cuda::ConvApi::graph;
  check_conv(kConvShapes[0], tf32, true);
  check_conv(kConvShapes[6], tf32, true);
}

TEST_CASE("graph-API plans are chosen once per shape, direction and beta, and honour the policy") {
  cuda::ComputeContext context;
  const ConvShape s = kConvShapes[2];
  cuda::ConvAlgorithmCache algorithms(strict_policy(cuda::ConvAlgorithmSearch::heuristic,
                                                    /*deterministic=*/true, cuda::ConvApi::graph));
  cuda::TensorDescriptorCache descriptors;
  cuda::ConvLayer first(s, true), second(s, true);
  const size_t limit = size_t{64} << 20;
  first.prepare(s.batch, context.cudnn(), algorithms, descriptors, nullptr, limit);
  // forward, backward data overwriting and accumulating, backward filter
  CHECK(algorithms.size() == 4);
  second.prepare(s.batch, context.cudnn(), algorithms, descriptors, nullptr, limit);
  CHECK(algorithms.size() == 4);
  for (const bool accumulate : {false, true})
    for (cuda::ConvDirection direction : {cuda::ConvDirection::forward,
                                          cuda::ConvDirection::backward_data,
                                          cuda::ConvDirection::backward_filter}) {
      CAPTURE(cuda::to_string(direction));
      CAPTURE(accumulate);
      const cuda::ConvAlgorithm& chosen =
          algorithms.choose(context.cudnn(), s, direction, nullptr, limit, accumulate);
      REQUIRE(chosen.graph != nullptr);
      CHECK(chosen.deterministic);
      CHECK_FALSE(chosen.graph->tensor_core);
      CHECK(chosen.workspace_bytes <= limit);
      CHECK(chosen.descriptor == nullptr);
    }
  const cuda::ConvAlgorithm& overwriting = algorithms.choose(
      context.cudnn(), s, cuda::ConvDirection::backward_data, nullptr, limit, false);
  const cuda::ConvAlgorithm& accumulating = algorithms.choose(
      context.cudnn(), s, cuda::ConvDirection::backward_data, nullptr, limit, true);
  CHECK(overwriting.graph != accumulating.graph);
}

TEST_CASE("convolution algorithms are chosen once per shape and honour the policy") {
  cuda::ComputeContext context;
  const ConvShape s = kConvShapes[2];
  cuda::ConvAlgorithmCache algorithms(
      strict_policy(cuda::ConvAlgorithmSearch::heuristic, /*deterministic=*/true));
  cuda::TensorDescriptorCache descriptors;
  cuda::ConvLayer first(s, true), second(s, true), other_batch(s, true);
  const size_t limit = size_t{64} << 20;
  first.prepare(s.batch, context.cudnn(), algorithms, descriptors, nullptr, limit);
  CHECK(algorithms.size() == 3);  // forward, backward data, backward filter
  second.prepare(s.batch, context.cudnn(), algorithms, descriptors, nullptr, limit);
  CHECK(algorithms.size() == 3);  // the same shape again: nothing new chosen
  other_batch.prepare(s.batch + 1, context.cudnn(), algorithms, descriptors, nullptr, limit);
  CHECK(algorithms.size() == 6);  // the batch size is part of the shape

  for (cuda::ConvDirection direction : {cuda::ConvDirection::forward,
                                        cuda::ConvDirection::backward_data,
                                        cuda::ConvDirection::backward_filter}) {
    CAPTURE(cuda::to_string(direction));
    const cuda::ConvAlgorithm& chosen =
        algorithms.choose(context.cudnn(), s, direction, nullptr, limit);
    CHECK(chosen.deterministic);
    CHECK(chosen.math == CUDNN_FMA_MATH);
    CHECK(chosen.workspace_bytes <= limit);
  }

}

TEST_CASE("deterministic convolution algorithms give the same bits on every run") {
  const ConvShape s = kConvShapes[6];
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  Rng rng(41);
  const auto x = testing::random_uniform<float>(rng, input_size(s));
  const auto w = testing::random_uniform<float>(rng, weight_size(s));
  const auto dy = testing::random_uniform<float>(rng, output_size(s));
  DeviceBuffer<float> d_x = to_device(x, stream), d_w = to_device(w, stream),
                      d_dy = to_device(dy, stream), d_dx(input_size(s)), d_dw(weight_size(s));
  cuda::ConvAlgorithmCache algorithms(
      strict_policy(cuda::ConvAlgorithmSearch::heuristic, /*deterministic=*/true));
  cuda::TensorDescriptorCache descriptors;
  cuda::ConvLayer layer(s, true);
  DeviceBuffer<std::byte> workspace(std::max<size_t>(
      layer.prepare(s.batch, context.cudnn(), algorithms, descriptors, nullptr, size_t{64} << 20),
      1));
  const cuda::CudnnCall call{context.cudnn(), workspace.get(), workspace.bytes()};
  std::vector<float> first_dw, first_dx;
  for (int run = 0; run < 3; ++run) {
    layer.backward_filter(call, s.batch, d_x.get(), d_dy.get(), d_dw.get());
    layer.backward_data(call, s.batch, d_dy.get(), d_w.get(), d_dx.get());
    const auto dw = to_host(d_dw, stream), dx = to_host(d_dx, stream);
    if (run == 0) {
      first_dw = dw;
      first_dx = dx;
    } else {
      CHECK(bitwise_equal(dw, first_dw));
      CHECK(bitwise_equal(dx, first_dx));
    }
  }
}

// ---- BatchNorm

namespace {

struct BatchNormCase {
  cpu::BatchNormShape shape;
  double offset;  // added to every input, so that a one-pass variance would lose precision
};

// Few values per channel make n / (n - 1) far from 1, so a biased running variance shows.
const BatchNormCase kBatchNormCases[] = {
    {{4, 3, 5, 7}, 0.0},
    {{2, 16, 1, 1}, 0.0},  // two values per channel: n / (n - 1) = 2
    {{3, 8, 2, 2}, 3.0},
    {{8, 64, 14, 14}, 1.0},
    {{2, 4, 33, 31}, -2.0},
};

size_t elements(const cpu::BatchNormShape& s) {
  return static_cast<size_t>(s.batch) * s.channels * s.height * s.width;
}

}  // namespace

// cuDNN reduces each channel's n values in float; along its trees the error is about
// u * log2(n) of the magnitude summed (under 1e-6 for our n <= 1568), and each output adds a
// few float operations on values of the size of its terms. We allow 1e-5 of each result's
// magnitude plus 1e-5 of the magnitude of the terms it was computed from: ten times the
// expected error, while a biased variance (off by 1 / (n - 1) >= 6e-4) or a mixed-up channel
// is far outside.
TEST_CASE("cuDNN BatchNorm matches the CPU twin: training forward, running statistics, backward") {
  constexpr double kRel = 1e-5;
  for (const BatchNormCase& c : kBatchNormCases) {
    const cpu::BatchNormShape& s = c.shape;
    CAPTURE(s.batch);
    CAPTURE(s.channels);
    CAPTURE(s.height);
    CAPTURE(s.width);
    cuda::ComputeContext context;
    cudaStream_t stream = context.stream();
    Rng rng(derive_seed(elements(s), "batchnorm"));
    auto x = testing::random_uniform<float>(rng, elements(s));
    if (s.batch * s.height * s.width == 2) {
      // Two values per channel: keep them apart, so that their variance is not lost to
      // cancellation (nearly equal values are ill-conditioned on any device, not a GPU error).
      for (int ch = 0; ch < s.channels; ++ch) {
        float& a = x[static_cast<size_t>(ch)];
        float& b = x[elements(s) / 2 + static_cast<size_t>(ch)];
        if (std::fabs(a - b) < 0.5f) b = a + (b >= a ? 0.5f : -0.5f);
      }
    }
    for (float& v : x) v += static_cast<float>(c.offset);
    const auto dy = testing::random_uniform<float>(rng, elements(s));
    const auto gamma = testing::random_uniform<float>(rng, s.channels, 0.5, 1.5);
    const auto beta = testing::random_uniform<float>(rng, s.channels, -0.5, 0.5);
    const auto running_mean = testing::random_uniform<float>(rng, s.channels, -0.2, 0.2);
    const auto running_var = testing::random_uniform<float>(rng, s.channels, 0.5, 1.5);

    // The twin, in double.
    const auto x64 = widened(x), dy64 = widened(dy), gamma64 = widened(gamma),
               beta64 = widened(beta);
    auto want_mean = widened(running_mean), want_var = widened(running_var);
    std::vector<double> want_y(x.size()), save_mean(s.channels), save_invstd(s.channels);
    cpu::batchnorm_forward_train<double>(s, x64.data(), gamma64.data(), beta64.data(),
                                         cuda::BatchNormLayer::kMomentum,
                                         cuda::BatchNormLayer::kEpsilon, want_mean.data(),
                                         want_var.data(), want_y.data(), save_mean.data(),
                                         save_invstd.data());
    std::vector<double> want_dx(x.size()), want_dgamma(s.channels), want_dbeta(s.channels);
    cpu::batchnorm_backward<double>(s, x64.data(), dy64.data(), gamma64.data(), save_mean.data(),
                                    save_invstd.data(), want_dx.data(), want_dgamma.data(),
                                    want_dbeta.data());

    cuda::TensorDescriptorCache descriptors;
    cuda::BatchNormLayer layer(s.channels, s.height, s.width);
    layer.prepare(s.batch, descriptors);
    DeviceBuffer<float> d_x = to_device(x, stream), d_dy = to_device(dy, stream),
                        d_gamma = to_device(gamma, stream), d_beta = to_device(beta, stream),
                        d_mean = to_device(running_mean, stream),
                        d_var = to_device(running_var, stream);
    auto d_y = poisoned<float>(x.size(), stream), d_dx = poisoned<float>(x.size(), stream);
    auto d_save_mean = poisoned<float>(s.channels, stream),
         d_save_invstd = poisoned<float>(s.channels, stream);
    auto d_dgamma = poisoned<float>(s.channels, stream),
         d_dbeta = poisoned<float>(s.channels, stream);
    layer.forward_train(context.cudnn(), s.batch, d_x.get(), d_gamma.get(), d_beta.get(),
                        d_mean.get(), d_var.get(), d_y.get(), d_save_mean.get(),
                        d_save_invstd.get());
    layer.backward(context.cudnn(), s.batch, d_x.get(), d_dy.get(), d_gamma.get(),
                   d_save_mean.get(), d_save_invstd.get(), d_dx.get(), d_dgamma.get(),
                   d_dbeta.get());

    // The magnitudes each channel's results are computed from, so that each bound scales with
    // the arithmetic behind its element:
    //   y  = x * (gamma * invstd) + (beta - mean * gamma * invstd), however it is grouped;
    //   dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), term by term;
    //   dgamma and dbeta sum |dy * xhat| and |dy| over the channel; the statistics sum |x|.
    const int64_t plane = static_cast<int64_t>(s.height) * s.width;
    std::vector<double> y_terms(s.channels), dx_terms(s.channels), dgamma_terms(s.channels),
        dbeta_terms(s.channels), x_terms(s.channels);
    for (int ch = 0; ch < s.channels; ++ch) {
      double sum_dy = 0, sum_dy_xhat = 0, max_xhat = 0, max_dy = 0, max_x = 0;
      for (int n = 0; n < s.batch; ++n)
        for (int64_t i = 0; i < plane; ++i) {
          const size_t at = (static_cast<size_t>(n) * s.channels + ch) * plane + i;
          const double xhat = (x64[at] - save_mean[ch]) * save_invstd[ch];
          max_x = std::max(max_x, std::fabs(x64[at]));
          sum_dy += std::fabs(dy64[at]);
          sum_dy_xhat += std::fabs(dy64[at] * xhat);
          max_xhat = std::max(max_xhat, std::fabs(xhat));
          max_dy = std::max(max_dy, std::fabs(dy64[at]));
        }
      const double scale = std::fabs(gamma64[ch]) * save_invstd[ch];
      y_terms[ch] = scale * (max_x + std::fabs(save_mean[ch])) + std::fabs(beta64[ch]);
      dx_terms[ch] = scale * max_dy * (2.0 + max_xhat * max_xhat);
      dgamma_terms[ch] = sum_dy_xhat;
      dbeta_terms[ch] = sum_dy;
      x_terms[ch] = max_x;
    }
    // kRel * (|want| + the terms of the element's channel).
    auto bounds = [&](const std::vector<double>& want, const std::vector<double>& terms) {
      std::vector<double> bound(want.size());
      const size_t per_channel = want.size() == static_cast<size_t>(s.channels) ? 1 : plane;
      for (size_t i = 0; i < want.size(); ++i)
        bound[i] = kRel * (std::fabs(want[i]) + terms[i / per_channel % s.channels]);
      return bound;
    };
    check_within("y", to_host(d_y, stream), want_y, bounds(want_y, y_terms));
    check_within("running_mean", to_host(d_mean, stream), want_mean, bounds(want_mean, x_terms));
    check_within("running_var", to_host(d_var, stream), want_var,
                 relative_bounds(want_var, kRel, 0.0));
    check_within("save_mean", to_host(d_save_mean, stream), save_mean, bounds(save_mean, x_terms));
    check_within("save_invstd", to_host(d_save_invstd, stream), save_invstd,
                 relative_bounds(save_invstd, kRel, 0.0));
    check_within("dx", to_host(d_dx, stream), want_dx, bounds(want_dx, dx_terms));
    check_within("dgamma", to_host(d_dgamma, stream), want_dgamma,
                 bounds(want_dgamma, dgamma_terms));
    check_within("dbeta", to_host(d_dbeta, stream), want_dbeta, bounds(want_dbeta, dbeta_terms));

    // Evaluation mode, with the statistics training just updated.
    const auto used_mean = to_host(d_mean, stream), used_var = to_host(d_var, stream);
    std::vector<double> want_eval(x.size());
    const auto used_mean64 = widened(used_mean), used_var64 = widened(used_var);
    cpu::batchnorm_forward_eval<double>(s, x64.data(), gamma64.data(), beta64.data(),
                                        used_mean64.data(), used_var64.data(),
                                        cuda::BatchNormLayer::kEpsilon, want_eval.data());
    auto d_eval = poisoned<float>(x.size(), stream);
    layer.forward_eval(context.cudnn(), s.batch, d_x.get(), d_gamma.get(), d_beta.get(),
                       d_mean.get(), d_var.get(), d_eval.get());
    std::vector<double> eval_terms(s.channels);
    for (int ch = 0; ch < s.channels; ++ch)
      eval_terms[ch] = std::fabs(gamma64[ch]) / std::sqrt(used_var64[ch] + 1e-5) *
                           (x_terms[ch] + std::fabs(used_mean64[ch])) +
                       std::fabs(beta64[ch]);
    check_within("eval y", to_host(d_eval, stream), want_eval, bounds(want_eval, eval_terms));
  }
}

TEST_CASE("BatchNorm refuses to train on a single value per channel, as PyTorch does") {
  cuda::BatchNormLayer layer(4, 1, 1);
  CHECK_THROWS_AS(layer.check_trainable(1), Error);
  CHECK_NOTHROW(layer.check_trainable(2));
}

// ---- nn.Linear

TEST_CASE("cuBLAS linear matches the CPU twin in strict float32, bias and all three products") {
  struct LinearCase {
    int batch, in, out;
  };
  for (const LinearCase c : {LinearCase{1, 1, 1}, LinearCase{3, 7, 5}, LinearCase{8, 512, 10},
                             LinearCase{5, 33, 1000}, LinearCase{16, 512, 1000}}) {
    CAPTURE(c.batch);
    CAPTURE(c.in);
    CAPTURE(c.out);
    cuda::ComputeContext context;
    cudaStream_t stream = context.stream();
    RDDP_CUBLAS_CHECK(cublasSetMathMode(context.cublas(), CUBLAS_DEFAULT_MATH));
    Rng rng(derive_seed(static_cast<uint64_t>(c.in * 7 + c.out), "linear"));
    const size_t nx = static_cast<size_t>(c.batch) * c.in, nw = static_cast<size_t>(c.out) * c.in,
                 ny = static_cast<size_t>(c.batch) * c.out;
    const auto x = testing::random_uniform<float>(rng, nx);
    const auto w = testing::random_uniform<float>(rng, nw);
    const auto b = testing::random_uniform<float>(rng, c.out);
    const auto dy = testing::random_uniform<float>(rng, ny);
    const std::vector<float> ones(c.batch, 1.0f);

    DeviceBuffer<float> d_x = to_device(x, stream), d_w = to_device(w, stream),
                        d_b = to_device(b, stream), d_dy = to_device(dy, stream),
                        d_ones = to_device(ones, stream);
    auto d_y = poisoned<float>(ny, stream), d_dx = poisoned<float>(nx, stream),
         d_dw = poisoned<float>(nw, stream), d_db = poisoned<float>(c.out, stream);
    cuda::linear_forward(context.cublas(), c.batch, c.in, c.out, d_x.get(), d_w.get(), d_b.get(),
                         d_y.get());
    cuda::linear_backward_data(context.cublas(), c.batch, c.in, c.out, d_dy.get(), d_w.get(),
                               d_dx.get());
    cuda::linear_backward_weight(context.cublas(), c.batch, c.in, c.out, d_x.get(), d_dy.get(),
                                 d_dw.get());
    cuda::linear_backward_bias(context.cublas(), c.batch, c.out, d_dy.get(), d_ones.get(),
                               d_db.get());

    const auto x64 = widened(x), w64 = widened(w), b64 = widened(b), dy64 = widened(dy);
    const auto ax = absolute(x64), aw = absolute(w64), ab = absolute(b64), ady = absolute(dy64);
    std::vector<double> want_y(ny), abs_y(ny), want_dx(nx), abs_dx(nx), want_dw(nw), abs_dw(nw),
        want_db(c.out), abs_db(c.out);
    cpu::linear_forward<double>(c.batch, c.in, c.out, x64.data(), w64.data(), b64.data(),
                                want_y.data());
    cpu::linear_forward<double>(c.batch, c.in, c.out, ax.data(), aw.data(), ab.data(),
                                abs_y.data());
    cpu::linear_backward<double>(c.batch, c.in, c.out, x64.data(), w64.data(), dy64.data(),
                                 want_dx.data(), want_dw.data(), want_db.data());
    cpu::linear_backward<double>(c.batch, c.in, c.out, ax.data(), aw.data(), ady.data(),
                                 abs_dx.data(), abs_dw.data(), abs_db.data());
    check_within("y", to_host(d_y, stream), want_y, dot_bounds(abs_y, c.in + 1, false));
    check_within("dx", to_host(d_dx, stream), want_dx, dot_bounds(abs_dx, c.out, false));
    check_within("dw", to_host(d_dw, stream), want_dw, dot_bounds(abs_dw, c.batch, false));
    check_within("db", to_host(d_db, stream), want_db, dot_bounds(abs_db, c.batch, false));
  }
}

// ---- our kernels: the same float expressions as the twins, so the same bits

namespace {

// Random values with the special cases mixed in: NaN, both zeros, infinities, exact ties.
std::vector<float> awkward_values(Rng& rng, size_t count) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1.0f, -1.0f};
  std::vector<float> values(count);
  for (float& v : values) {
    const uint64_t pick = rng.below(16);
    v = pick < 7 ? specials[pick] : static_cast<float>(rng.uniform(-2.0, 2.0));
  }
  return values;
}

}  // namespace

TEST_CASE("ReLU, residual add and their fusion match the CPU twins bit for bit") {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  for (const int64_t count : {int64_t{1}, int64_t{1000}, int64_t{3} * 1000 * 1000 + 7}) {
    CAPTURE(count);
    Rng rng(derive_seed(static_cast<uint64_t>(count), "elementwise"));
    const auto x = awkward_values(rng, count), y = awkward_values(rng, count),
               dy = awkward_values(rng, count);
    const DeviceBuffer<float> d_x = to_device(x, stream), d_y = to_device(y, stream),
                              d_dy = to_device(dy, stream);
    std::vector<float> want(count), want_tmp(count);

    auto d_out = poisoned<float>(count, stream);
    cuda::relu_forward(count, d_x.get(), d_out.get(), stream);
    cpu::relu_forward(count, x.data(), want.data());
    CHECK(bitwise_equal(to_host(d_out, stream), want));

    d_out = poisoned<float>(count, stream);
    cuda::relu_backward(count, d_x.get(), d_dy.get(), d_out.get(), stream);
    cpu::relu_backward(count, x.data(), dy.data(), want.data());
    CHECK(bitwise_equal(to_host(d_out, stream), want));

    d_out = poisoned<float>(count, stream);
    cuda::add(count, d_x.get(), d_y.get(), d_out.get(), stream);
    cpu::add(count, x.data(), y.data(), want.data());
    CHECK(same_values(to_host(d_out, stream), want));

    d_out = to_device(x, stream);  // in place, as the executor runs it
    cuda::add_relu(count, d_out.get(), d_y.get(), d_out.get(), stream);
    cpu::add(count, x.data(), y.data(), want_tmp.data());
    cpu::relu_forward(count, want_tmp.data(), want.data());
    CHECK(same_values(to_host(d_out, stream), want));
  }
}

TEST_CASE("broadcast_rows copies the row into every row") {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  Rng rng(3);
  const int rows = 37, cols = 1001;
  const auto row = testing::random_uniform<float>(rng, cols);
  const DeviceBuffer<float> d_row = to_device(row, stream);
  auto d_out = poisoned<float>(static_cast<size_t>(rows) * cols, stream);
  cuda::broadcast_rows(rows, cols, d_row.get(), d_out.get(), stream);
  const auto out = to_host(d_out, stream);
  size_t wrong = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) wrong += out[static_cast<size_t>(r) * cols + c] != row[c];
  CHECK(wrong == 0);
}

TEST_CASE("max pooling matches the CPU twin bit for bit: values, argmax and gradients") {
  const PoolShape shapes[] = {
      {2, 3, 9, 9, 3, 2, 1},   {1, 2, 8, 7, 3, 2, 1},   {2, 4, 112, 112, 3, 2, 1},
      {1, 1, 1, 1, 3, 2, 1},   {3, 5, 6, 6, 2, 2, 0},   {2, 2, 7, 5, 3, 1, 1},
      {1, 3, 10, 10, 5, 3, 2},
  };
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  for (const PoolShape& s : shapes) {
    CAPTURE(s.in_h);
    CAPTURE(s.in_w);
    CAPTURE(s.kernel);
    CAPTURE(s.stride);
    CAPTURE(s.pad);
    const size_t in = static_cast<size_t>(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t out = static_cast<size_t>(s.batch) * s.channels * s.out_h() * s.out_w();
    Rng rng(derive_seed(in, "maxpool"));
    // Values on a coarse grid, so that windows hold ties, with NaNs and infinities among them.
    std::vector<float> x = awkward_values(rng, in);
    for (float& v : x)
      if (std::isfinite(v)) v = std::round(v * 2.0f) / 2.0f;
    const auto dy = testing::random_uniform<float>(rng, out);

    std::vector<float> want_y(out), want_dx(in);
    std::vector<int32_t> want_argmax(out);
    cpu::maxpool_forward(s, x.data(), want_y.data(), want_argmax.data());
    cpu::maxpool_backward(s, dy.data(), want_argmax.data(), want_dx.data());

    const DeviceBuffer<float> d_x = to_device(x, stream), d_dy = to_device(dy, stream);
    auto d_y = poisoned<float>(out, stream), d_dx = poisoned<float>(in, stream);
    auto d_argmax = poisoned<uint8_t>(out, stream);
    cuda::maxpool_forward(s, d_x.get(), d_y.get(), d_argmax.get(), stream);
    cuda::maxpool_backward(s, d_dy.get(), d_argmax.get(), d_dx.get(), stream);
    CHECK(bitwise_equal(to_host(d_y, stream), want_y));
    CHECK(to_host(d_argmax, stream) == window_places(s, want_argmax));
    CHECK(bitwise_equal(to_host(d_dx, stream), want_dx));
  }
}

TEST_CASE("max pooling refuses the shapes its CPU twin refuses") {
  cuda::ComputeContext context;
  // Padding over half the window, and a window larger than the padded input; nothing is
  // launched, so the null buffers are never touched.
  for (const PoolShape& s :
       {PoolShape{1, 1, 4, 4, 3, 2, 2}, PoolShape{1, 1, 1, 1, 4, 1, 1}}) {
    CHECK_THROWS_AS(cuda::maxpool_forward<float>(s, nullptr, nullptr, nullptr, context.stream()),
                    Error);
    CHECK_THROWS_AS(cpu::maxpool_forward<float>(s, nullptr, nullptr, nullptr), Error);
  }
}

TEST_CASE("global average pooling matches the CPU twin, NCHW and NHWC") {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  struct PoolCase {
    int batch, channels, spatial;
  };
  for (const bool nhwc : {false, true}) {
    const MemoryFormat format = nhwc ? MemoryFormat::nhwc : MemoryFormat::nchw;
    for (const PoolCase c : {PoolCase{1, 1, 1}, PoolCase{3, 512, 49}, PoolCase{2, 64, 12544},
                             PoolCase{5, 7, 33}}) {
      CAPTURE(nhwc);
      CAPTURE(c.channels);
      CAPTURE(c.spatial);
      const size_t in = static_cast<size_t>(c.batch) * c.channels * c.spatial;
      const size_t out = static_cast<size_t>(c.batch) * c.channels;
      Rng rng(derive_seed(in, nhwc ? "avgpool nhwc" : "avgpool"));
      const auto x = testing::random_uniform<float>(rng, in, -3.0, 5.0);
      const auto dy = testing::random_uniform<float>(rng, out);
      std::vector<float> want_y(out), want_dx(in);
      cpu::global_avgpool_forward(c.batch, c.channels, c.spatial, x.data(), want_y.data());
      cpu::global_avgpool_backward(c.batch, c.channels, c.spatial, dy.data(), want_dx.data());

      // The spatial plane as 1 x spatial; y and dy are [N, C] in both layouts.
      const auto d_x = to_device(testing::in_layout(x, nhwc, c.channels, 1, c.spatial), stream);
      const auto d_dy = to_device(dy, stream);
      auto d_y = poisoned<float>(out, stream), d_dx = poisoned<float>(in, stream);
      cuda::global_avgpool_forward(c.batch, c.channels, c.spatial, d_x.get(), d_y.get(), stream,
                                   format);
      cuda::global_avgpool_backward(c.batch, c.channels, c.spatial, d_dy.get(), d_dx.get(),
                                    stream, format);
      // Both round a double sum to float; the sums differ only in order, by a few units of
      // double's last place, which moves the float result by at most one unit of its last
      // place, and only when the sum lies right at a rounding boundary.
      const auto y = to_host(d_y, stream);
      size_t off = 0;
      for (size_t i = 0; i < out; ++i)
        off += !(std::fabs(y[i] - want_y[i]) <=
                 std::fabs(want_y[i]) * std::numeric_limits<float>::epsilon());
      CHECK(off == 0);
      CHECK(bitwise_equal(
          testing::from_layout(to_host(d_dx, stream), nhwc, c.channels, 1, c.spatial), want_dx));
    }
  }
}

TEST_CASE("metric sums add each step's loss times its batch, correct rows and bad labels") {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  DeviceBuffer<cuda::MetricSums> sums(1);
  RDDP_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0, sums.bytes(), stream));
  const std::vector<cuda::XentMetrics> steps{{0.5, 3, 4, 0}, {1.25, 1, 3, 2}};
  const int batches[] = {4, 3};
  double want_loss = 0;
  int64_t want_correct = 0, want_top5 = 0, want_count = 0, want_bad = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const DeviceBuffer<cuda::XentMetrics> step = to_device(std::vector{steps[i]}, stream);
    cuda::accumulate_metrics(step.get(), batches[i], sums.get(), stream);
    context.synchronize();
    want_loss += steps[i].loss * batches[i];
    want_correct += steps[i].correct;
    want_top5 += steps[i].correct_top5;
    want_count += batches[i];
    want_bad += steps[i].bad_labels;
  }
  const cuda::MetricSums got = to_host(sums, stream)[0];
  CHECK(got.loss_sum == want_loss);
  CHECK(got.correct == want_correct);
  CHECK(got.correct_top5 == want_top5);
  CHECK(got.count == want_count);
  CHECK(got.bad_labels == want_bad);
}
