#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/gradient_checker.h"
#include "support/test_tensors.h"

using namespace rddp;
using rddp::testing::check_gradients;
using rddp::testing::compare_close;
using rddp::testing::converted;
using rddp::testing::dot;
using rddp::testing::gradient_input;
using rddp::testing::nan_filled;
using rddp::testing::random_uniform;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// Convolution

size_t input_size(const ConvShape& s) {
  return size_t(s.batch) * s.in_channels * s.in_h * s.in_w;
}
size_t output_size(const ConvShape& s) {
  return size_t(s.batch) * s.out_channels * s.out_h() * s.out_w();
}
size_t weight_size(const ConvShape& s) {
  return size_t(s.out_channels) * s.in_channels * s.kernel * s.kernel;
}

std::string describe(const ConvShape& s) {
  std::ostringstream out;
  out << "x " << s.batch << "x" << s.in_channels << "x" << s.in_h << "x" << s.in_w << " -> "
      << s.out_channels << " channels, kernel " << s.kernel << " stride " << s.stride << " pad "
      << s.pad;
  return out.str();
}

// The definition, one output element at a time, with padding as an explicit bounds test.
std::vector<double> conv_reference(const ConvShape& s, const std::vector<double>& x,
                                   const std::vector<double>& w) {
  std::vector<double> y(output_size(s));
  size_t out = 0;
  for (int n = 0; n < s.batch; ++n)
    for (int co = 0; co < s.out_channels; ++co)
      for (int oh = 0; oh < s.out_h(); ++oh)
        for (int ow = 0; ow < s.out_w(); ++ow, ++out) {
          double sum = 0.0;
          for (int ci = 0; ci < s.in_channels; ++ci)
            for (int kh = 0; kh < s.kernel; ++kh)
              for (int kw = 0; kw < s.kernel; ++kw) {
                const int ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
                sum += w[((size_t(co) * s.in_channels + ci) * s.kernel + kh) * s.kernel + kw] *
                       x[((size_t(n) * s.in_channels + ci) * s.in_h + ih) * s.in_w + iw];
              }
          y[out] = sum;
        }
  return y;
}

// Every kind of convolution ResNet-18 has, at small sizes, plus the awkward cases and each
// path through the implementation.
const std::vector<ConvShape>& conv_shapes() {
  static const std::vector<ConvShape> shapes = {
      ConvShape{2, 5, 6, 7, 4, 1, 1, 0},    // 1x1, no unfolding
      ConvShape{2, 4, 7, 7, 5, 1, 2, 0},    // 1x1 stride 2 (downsample)
      ConvShape{2, 3, 8, 8, 6, 3, 1, 1},    // 3x3 pad 1
      ConvShape{1, 3, 15, 15, 4, 7, 2, 3},  // the 7x7/2 stem on an odd input
      ConvShape{2, 4, 9, 9, 3, 3, 2, 1},    // stride 2, odd input
      ConvShape{3, 2, 5, 11, 3, 3, 1, 1},   // non-square
      ConvShape{1, 1, 7, 4, 2, 3, 2, 0},    // one channel, no padding, stride leaves a row
      ConvShape{2, 1, 6, 5, 2, 3, 1, 1},    // one input channel, batch > 1
      ConvShape{1, 3, 2, 3, 2, 7, 2, 3},    // input smaller than the kernel
      ConvShape{2, 2, 1, 1, 3, 7, 2, 3},    // 1x1 input under the stem: mostly padding
      // Small planes are unfolded several images at a time: 10x10 outputs go three to a
      // GEMM, so a batch of 4 ends with a partial chunk. A 1x1 convolution over a large plane
      // (one image per GEMM) reads its input directly.
      ConvShape{4, 2, 10, 10, 3, 3, 1, 1},
      ConvShape{2, 3, 16, 17, 4, 1, 1, 0},
  };
  return shapes;
}

// ---------------------------------------------------------------------------------------------
// BatchNorm

size_t numel(const cpu::BatchNormShape& s) {
  return size_t(s.batch) * s.channels * s.height * s.width;
}

cpu::BatchNormShape bn_shape(int batch, int channels, int height, int width) {
  cpu::BatchNormShape s;
  s.batch = batch;
  s.channels = channels;
  s.height = height;
  s.width = width;
  return s;
}

// Runs training-mode forward on copies of the running statistics.
struct BatchNormRun {
  std::vector<double> y, running_mean, running_var, save_mean, save_invstd;
};
BatchNormRun run_batchnorm(const cpu::BatchNormShape& s, const std::vector<double>& x,
                           const std::vector<double>& gamma, const std::vector<double>& beta,
                           std::vector<double> running_mean, std::vector<double> running_var) {
  BatchNormRun run;
  run.y = nan_filled<double>(numel(s));
  run.save_mean = nan_filled<double>(s.channels);
  run.save_invstd = nan_filled<double>(s.channels);
  cpu::batchnorm_forward_train<double>(s, x.data(), gamma.data(), beta.data(), 0.1, 1e-5,
                                       running_mean.data(), running_var.data(), run.y.data(),
                                       run.save_mean.data(), run.save_invstd.data());
  run.running_mean = std::move(running_mean);
  run.running_var = std::move(running_var);
  return run;
}

// ---------------------------------------------------------------------------------------------
// Pooling

PoolShape pool_shape(int batch, int channels, int in_h, int in_w, int kernel, int stride,
                          int pad) {
  PoolShape s;
  s.batch = batch;
  s.channels = channels;
  s.in_h = in_h;
  s.in_w = in_w;
  s.kernel = kernel;
  s.stride = stride;
  s.pad = pad;
  return s;
}

size_t input_size(const PoolShape& s) {
  return size_t(s.batch) * s.channels * s.in_h * s.in_w;
}
size_t output_size(const PoolShape& s) {
  return size_t(s.batch) * s.channels * s.out_h() * s.out_w();
}

// Distinct values 0.01 apart in random order: no ties, and no nudge of a gradient check can
// change which element of a window is the largest.
std::vector<double> shuffled_distinct(Rng& rng, size_t size) {
  std::vector<double> values(size);
  for (size_t i = 0; i < size; ++i) values[i] = 0.01 * double(i) - 0.005 * double(size);
  for (size_t i = size; i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  return values;
}

struct PoolResult {
  std::vector<double> y;
  std::vector<int32_t> argmax;
};

PoolResult run_maxpool(const PoolShape& s, const std::vector<double>& x) {
  PoolResult result{nan_filled<double>(output_size(s)), std::vector<int32_t>(output_size(s), -1)};
  cpu::maxpool_forward<double>(s, x.data(), result.y.data(), result.argmax.data());
  return result;
}

}  // namespace

// =============================================================================================

TEST_CASE_TEMPLATE("conv2d forward matches the direct definition", T, float, double) {
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  Rng rng(21);
  for (const ConvShape& s : conv_shapes()) {
    INFO(describe(s));
    // Inputs rounded to T first, so that the reference sees exactly what the layer sees.
    const auto x = converted<T>(random_uniform<double>(rng, input_size(s)));
    const auto w = converted<T>(random_uniform<double>(rng, weight_size(s)));
    auto y = nan_filled<T>(output_size(s));
    cpu::conv2d_forward<T>(s, x.data(), w.data(), y.data());
    const auto expected = conv_reference(s, converted<double>(x), converted<double>(w));
    const auto report = compare_close(y, expected, tolerance, tolerance);
    CHECK_MESSAGE(report.passed(), report.summary());
  }
}

TEST_CASE("conv2d backward: dx and dw match central differences") {
  Rng rng(22);
  for (const ConvShape& s : conv_shapes()) {
    INFO(describe(s));
    auto x = random_uniform<double>(rng, input_size(s));
    auto w = random_uniform<double>(rng, weight_size(s));
    const auto upstream = random_uniform<double>(rng, output_size(s));
    // loss = sum(conv(x, w) * upstream), whose gradient with respect to y is `upstream`.
    const auto loss = [&] {
      auto y = nan_filled<double>(output_size(s));
      cpu::conv2d_forward<double>(s, x.data(), w.data(), y.data());
      return dot(y, upstream);
    };
    auto dx = nan_filled<double>(x.size());
    auto dw = nan_filled<double>(w.size());
    cpu::conv2d_backward_data<double>(s, upstream.data(), w.data(), dx.data());
    cpu::conv2d_backward_filter<double>(s, x.data(), upstream.data(), dw.data());
    const auto report =
        check_gradients(loss, {gradient_input("x", x, dx), gradient_input("w", w, dw)});
    CHECK_MESSAGE(report.passed(), report.summary());
  }
}

TEST_CASE("conv2d backward in float agrees with double") {
  Rng rng(23);
  for (const ConvShape& s : conv_shapes()) {
    INFO(describe(s));
    const auto x = random_uniform<double>(rng, input_size(s));
    const auto w = random_uniform<double>(rng, weight_size(s));
    const auto dy = random_uniform<double>(rng, output_size(s));
    auto dx = nan_filled<double>(x.size()), dw = nan_filled<double>(w.size());
    cpu::conv2d_backward_data<double>(s, dy.data(), w.data(), dx.data());
    cpu::conv2d_backward_filter<double>(s, x.data(), dy.data(), dw.data());
    const auto xf = converted<float>(x), wf = converted<float>(w), dyf = converted<float>(dy);
    auto dxf = nan_filled<float>(x.size()), dwf = nan_filled<float>(w.size());
    cpu::conv2d_backward_data<float>(s, dyf.data(), wf.data(), dxf.data());
    cpu::conv2d_backward_filter<float>(s, xf.data(), dyf.data(), dwf.data());
    // Float inputs are rounded (relative 6e-8) and sums run over at most a few hundred terms.
    const auto dx_report = compare_close(dxf, dx, 1e-4, 1e-4);
    const auto dw_report = compare_close(dwf, dw, 1e-4, 1e-4);
    CHECK_MESSAGE(dx_report.passed(), "dx: ", dx_report.summary());
    CHECK_MESSAGE(dw_report.passed(), "dw: ", dw_report.summary());
  }
}

TEST_CASE("conv2d refuses windows that do not fit") {
  float dummy = 0.0f;
  auto s = ConvShape{1, 1, 2, 2, 1, 3, 1, 0};  // 2x2 input, 3x3 kernel, no padding
  CHECK_THROWS_WITH_AS(cpu::conv2d_forward<float>(s, &dummy, &dummy, &dummy),
                       doctest::Contains("smaller than the 3x3 window"), Error);
  s = ConvShape{1, 1, 4, 4, 1, 3, 0, 1};
  CHECK_THROWS_AS(cpu::conv2d_backward_data<float>(s, &dummy, &dummy, &dummy), Error);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("batchnorm training: dx, dgamma and dbeta match central differences") {
  Rng rng(31);
  for (const auto& s : {bn_shape(3, 4, 2, 3), bn_shape(4, 2, 1, 1), bn_shape(1, 3, 3, 2)}) {
    CAPTURE(s.batch);
    CAPTURE(s.height);
    auto x = random_uniform<double>(rng, numel(s), -2.0, 3.0);
    auto gamma = random_uniform<double>(rng, s.channels, 0.5, 1.5);
    auto beta = random_uniform<double>(rng, s.channels);
    const auto upstream = random_uniform<double>(rng, numel(s));
    const std::vector<double> running_mean(s.channels, 0.0), running_var(s.channels, 1.0);
    // The batch statistics are recomputed at every nudge, so the check covers the paths
    // through the mean and the variance, not just the affine part.
    const auto loss = [&] {
      return dot(run_batchnorm(s, x, gamma, beta, running_mean, running_var).y, upstream);
    };
    const BatchNormRun forward = run_batchnorm(s, x, gamma, beta, running_mean, running_var);
    auto dx = nan_filled<double>(x.size());
    auto dgamma = nan_filled<double>(s.channels), dbeta = nan_filled<double>(s.channels);
    cpu::batchnorm_backward<double>(s, x.data(), upstream.data(), gamma.data(),
                                    forward.save_mean.data(), forward.save_invstd.data(),
                                    dx.data(), dgamma.data(), dbeta.data());
    const auto report =
        check_gradients(loss, {gradient_input("x", x, dx), gradient_input("gamma", gamma, dgamma),
                               gradient_input("beta", beta, dbeta)});
    CHECK_MESSAGE(report.passed(), report.summary());
  }
}

TEST_CASE("batchnorm training: batch statistics and the running-statistics rule") {
  // Two channels of four values each, laid out NCHW as [n][c][w]:
  //   channel 0: 1, 2, 3, 4   mean 2.5, biased variance 1.25, unbiased 5/3
  //   channel 1: -2, 0, 0, 2  mean 0,   biased variance 2,    unbiased 8/3
  const auto s = bn_shape(2, 2, 1, 2);
  const std::vector<double> x = {1, 2, -2, 0, 3, 4, 0, 2};
  const std::vector<double> gamma = {2.0, 0.5}, beta = {0.1, -1.0};
  const BatchNormRun run = run_batchnorm(s, x, gamma, beta, {1.0, -1.0}, {2.0, 0.5});
  // momentum 0.1: new = 0.9 * old + 0.1 * batch value, with the unbiased variance.
  CHECK(run.running_mean[0] == doctest::Approx(0.9 * 1.0 + 0.1 * 2.5).epsilon(1e-14));
  CHECK(run.running_mean[1] == doctest::Approx(0.9 * -1.0 + 0.1 * 0.0).epsilon(1e-14));
  CHECK(run.running_var[0] == doctest::Approx(0.9 * 2.0 + 0.1 * 5.0 / 3.0).epsilon(1e-14));
  CHECK(run.running_var[1] == doctest::Approx(0.9 * 0.5 + 0.1 * 8.0 / 3.0).epsilon(1e-14));
  CHECK(run.save_mean[0] == doctest::Approx(2.5).epsilon(1e-14));
  CHECK(run.save_mean[1] == doctest::Approx(0.0).epsilon(1e-14));
  // Normalisation uses the biased variance.
  const double invstd0 = 1.0 / std::sqrt(1.25 + 1e-5), invstd1 = 1.0 / std::sqrt(2.0 + 1e-5);
  CHECK(run.save_invstd[0] == doctest::Approx(invstd0).epsilon(1e-14));
  CHECK(run.save_invstd[1] == doctest::Approx(invstd1).epsilon(1e-14));
  const std::vector<double> expected = {
      (1 - 2.5) * invstd0 * 2.0 + 0.1, (2 - 2.5) * invstd0 * 2.0 + 0.1,
      (-2 - 0.0) * invstd1 * 0.5 - 1.0, (0 - 0.0) * invstd1 * 0.5 - 1.0,
      (3 - 2.5) * invstd0 * 2.0 + 0.1, (4 - 2.5) * invstd0 * 2.0 + 0.1,
      (0 - 0.0) * invstd1 * 0.5 - 1.0, (2 - 0.0) * invstd1 * 0.5 - 1.0};
  const auto report = compare_close(run.y, expected, 1e-14, 1e-14);
  CHECK_MESSAGE(report.passed(), report.summary());
}

TEST_CASE("batchnorm eval mode normalises with the running statistics and leaves them alone") {
  const auto s = bn_shape(1, 2, 1, 2);
  const std::vector<double> x = {3, -1, 0, 2};
  const std::vector<double> gamma = {2.0, 0.5}, beta = {0.1, -1.0};
  const std::vector<double> running_mean = {1.0, 0.5}, running_var = {4.0, 0.25};
  auto y = nan_filled<double>(x.size());
  // eps 0 keeps the arithmetic exact: channel 0 divides by 2, channel 1 by 0.5.
  cpu::batchnorm_forward_eval<double>(s, x.data(), gamma.data(), beta.data(), running_mean.data(),
                                      running_var.data(), 0.0, y.data());
  const std::vector<double> expected = {(3 - 1.0) / 2 * 2.0 + 0.1, (-1 - 1.0) / 2 * 2.0 + 0.1,
                                        (0 - 0.5) / 0.5 * 0.5 - 1.0, (2 - 0.5) / 0.5 * 0.5 - 1.0};
  const auto report = compare_close(y, expected, 1e-15, 1e-15);
  CHECK_MESSAGE(report.passed(), report.summary());
}

TEST_CASE("batchnorm float matches double") {
  Rng rng(32);
  const auto s = bn_shape(2, 3, 5, 7);
  // An offset mean, as activations have: single-pass float statistics would lose digits here.
  const auto x = random_uniform<double>(rng, numel(s), 99.0, 101.0);
  const auto gamma = random_uniform<double>(rng, s.channels, 0.5, 1.5);
  const auto beta = random_uniform<double>(rng, s.channels);
  const auto dy = random_uniform<double>(rng, numel(s));
  const std::vector<double> zeros(s.channels, 0.0), ones(s.channels, 1.0);
  const auto xf = converted<float>(x);
  const auto reference = run_batchnorm(s, converted<double>(xf), gamma, beta, zeros, ones);
  auto dx = nan_filled<double>(x.size());
  auto dgamma = nan_filled<double>(s.channels), dbeta = nan_filled<double>(s.channels);
  cpu::batchnorm_backward<double>(s, converted<double>(xf).data(), dy.data(), gamma.data(),
                                  reference.save_mean.data(), reference.save_invstd.data(),
                                  dx.data(), dgamma.data(), dbeta.data());

  const auto gammaf = converted<float>(gamma), betaf = converted<float>(beta),
             dyf = converted<float>(dy);
  std::vector<float> running_mean(s.channels, 0.0f), running_var(s.channels, 1.0f);
  auto y = nan_filled<float>(x.size());
  auto save_mean = nan_filled<float>(s.channels), save_invstd = nan_filled<float>(s.channels);
  cpu::batchnorm_forward_train<float>(s, xf.data(), gammaf.data(), betaf.data(), 0.1f, 1e-5f,
                                      running_mean.data(), running_var.data(), y.data(),
                                      save_mean.data(), save_invstd.data());
  auto dxf = nan_filled<float>(x.size());
  auto dgammaf = nan_filled<float>(s.channels), dbetaf = nan_filled<float>(s.channels);
  cpu::batchnorm_backward<float>(s, xf.data(), dyf.data(), gammaf.data(), save_mean.data(),
                                 save_invstd.data(), dxf.data(), dgammaf.data(), dbetaf.data());
  for (const auto& [name, report] :
       {std::pair{"y", compare_close(y, reference.y, 1e-4, 1e-4)},
        std::pair{"running_mean", compare_close(running_mean, reference.running_mean, 1e-5, 1e-6)},
        std::pair{"running_var", compare_close(running_var, reference.running_var, 1e-5, 1e-4)},
        std::pair{"dx", compare_close(dxf, dx, 1e-4, 1e-4)},
        std::pair{"dgamma", compare_close(dgammaf, dgamma, 1e-4, 1e-4)},
        std::pair{"dbeta", compare_close(dbetaf, dbeta, 1e-5, 1e-5)}})
    CHECK_MESSAGE(report.passed(), name, ": ", report.summary());
}

TEST_CASE("batchnorm training refuses a single value per channel") {
  const auto s = bn_shape(1, 3, 1, 1);
  const std::vector<double> x = {1, 2, 3}, gamma(3, 1.0), beta(3, 0.0);
  CHECK_THROWS_WITH_AS(run_batchnorm(s, x, gamma, beta, {0, 0, 0}, {1, 1, 1}),
                       doctest::Contains("batch * height * width is 1"), Error);
  // Two values per channel are enough, whichever dimension provides them.
  CHECK_NOTHROW(run_batchnorm(bn_shape(2, 3, 1, 1), {1, 2, 3, 4, 5, 6}, gamma, beta, {0, 0, 0},
                              {1, 1, 1}));
  CHECK_NOTHROW(run_batchnorm(bn_shape(1, 3, 1, 2), {1, 2, 3, 4, 5, 6}, gamma, beta, {0, 0, 0},
                              {1, 1, 1}));
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("relu backward matches central differences") {
  Rng rng(41);
  // Values kept 0.05 away from the kink, far beyond the difference step.
  std::vector<double> x(200);
  for (double& value : x) value = (rng.uniform() < 0.5 ? -1.0 : 1.0) * rng.uniform(0.05, 2.0);
  const auto upstream = random_uniform<double>(rng, x.size());
  const auto relu = [&] {
    auto y = nan_filled<double>(x.size());
    cpu::relu_forward<double>(int64_t(x.size()), x.data(), y.data());
    return y;
  };
  const auto y = relu();
  auto dx = nan_filled<double>(x.size());
  cpu::relu_backward<double>(int64_t(x.size()), y.data(), upstream.data(), dx.data());
  const auto report =
      check_gradients([&] { return dot(relu(), upstream); }, {gradient_input("x", x, dx)});
  CHECK_MESSAGE(report.passed(), report.summary());
}

TEST_CASE("relu works in place and passes NaN on as torch.relu does") {
  std::vector<float> x = {-1.5f, 0.0f, -0.0f, 2.0f, float(kNaN)};
  cpu::relu_forward<float>(int64_t(x.size()), x.data(), x.data());
  CHECK(x[0] == 0.0f);
  CHECK(x[1] == 0.0f);
  CHECK(x[3] == 2.0f);
  CHECK(std::isnan(x[4]));
  // Backward zeroes where y <= 0; a NaN output is not <= 0, so its gradient passes.
  std::vector<float> grad = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  cpu::relu_backward<float>(int64_t(x.size()), x.data(), grad.data(), grad.data());
  CHECK(grad == std::vector<float>{0.0f, 0.0f, 0.0f, 4.0f, 5.0f});
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("maxpool forward takes each window's maximum, padding excluded") {
  Rng rng(51);
  for (const auto& s : {pool_shape(2, 3, 7, 7, 3, 2, 1), pool_shape(1, 2, 8, 6, 3, 2, 1),
                        pool_shape(1, 1, 5, 5, 2, 2, 0), pool_shape(1, 2, 6, 5, 3, 1, 1),
                        pool_shape(1, 1, 1, 1, 3, 2, 1)}) {
    CAPTURE(s.in_h);
    CAPTURE(s.stride);
    // All negative: a padded zero winning anywhere would show.
    const auto x = random_uniform<double>(rng, input_size(s), -3.0, -1.0);
    const PoolResult result = run_maxpool(s, x);
    size_t out = 0;
    for (int plane = 0; plane < s.batch * s.channels; ++plane)
      for (int oh = 0; oh < s.out_h(); ++oh)
        for (int ow = 0; ow < s.out_w(); ++ow, ++out) {
          std::vector<double> window;
          for (int ih = oh * s.stride - s.pad; ih < oh * s.stride - s.pad + s.kernel; ++ih)
            for (int iw = ow * s.stride - s.pad; iw < ow * s.stride - s.pad + s.kernel; ++iw)
              if (ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w)
                window.push_back(x[(size_t(plane) * s.in_h + ih) * s.in_w + iw]);
          REQUIRE(!window.empty());
          CHECK(result.y[out] == *std::max_element(window.begin(), window.end()));
          const int32_t index = result.argmax[out];
          REQUIRE((index >= 0 && index < s.in_h * s.in_w));
          CHECK(x[size_t(plane) * s.in_h * s.in_w + index] == result.y[out]);
        }
  }
}

TEST_CASE("maxpool backward matches central differences") {
  Rng rng(52);
  for (const auto& s : {pool_shape(2, 3, 7, 7, 3, 2, 1), pool_shape(1, 2, 8, 6, 3, 2, 1),
                        pool_shape(1, 1, 5, 5, 2, 2, 0), pool_shape(1, 2, 6, 5, 3, 1, 1)}) {
    CAPTURE(s.in_h);
    CAPTURE(s.stride);
    auto x = shuffled_distinct(rng, input_size(s));
    const auto upstream = random_uniform<double>(rng, output_size(s));
    const PoolResult forward = run_maxpool(s, x);
    auto dx = nan_filled<double>(x.size());
    cpu::maxpool_backward<double>(s, upstream.data(), forward.argmax.data(), dx.data());
    const auto report = check_gradients([&] { return dot(run_maxpool(s, x).y, upstream); },
                                        {gradient_input("x", x, dx)});
    CHECK_MESSAGE(report.passed(), report.summary());
  }
}

TEST_CASE("maxpool ties pick the first maximum in row-major window order") {
  // 2x2 windows, stride 2, over one 4x4 plane.
  const auto s = pool_shape(1, 1, 4, 4, 2, 2, 0);
  const std::vector<double> x = {5, 5, 1, 7,  //
                                 1, 1, 7, 7,  //
                                 2, 1, 0, 0,  //
                                 3, 3, 0, 0};
  const PoolResult result = run_maxpool(s, x);
  CHECK(result.y == std::vector<double>{5, 7, 3, 0});
  CHECK(result.argmax == std::vector<int32_t>{0, 3, 12, 10});

  // A constant plane under 3x3/2 windows with padding 1: every window keeps its first real
  // position, the top-left corner of the window clipped to the input.
  const auto padded = pool_shape(1, 1, 5, 4, 3, 2, 1);
  const PoolResult flat = run_maxpool(padded, std::vector<double>(5 * 4, -2.0));
  size_t out = 0;
  for (int oh = 0; oh < padded.out_h(); ++oh)
    for (int ow = 0; ow < padded.out_w(); ++ow, ++out) {
      const int first_h = std::max(oh * 2 - 1, 0), first_w = std::max(ow * 2 - 1, 0);
      CHECK(flat.argmax[out] == first_h * 4 + first_w);
      CHECK(flat.y[out] == -2.0);
    }
}

TEST_CASE("maxpool selects NaN as PyTorch does") {
  // torch.nn.functional.max_pool2d over this 3x3 window returns NaN with index 3: a NaN
  // replaces the running maximum whenever it is met, so the last NaN wins.
  const auto s = pool_shape(1, 1, 3, 3, 3, 1, 0);
  const std::vector<double> x = {1, kNaN, 3, kNaN, 2, 0, 5, 5, 1};
  const PoolResult result = run_maxpool(s, x);
  CHECK(std::isnan(result.y[0]));
  CHECK(result.argmax[0] == 3);
}

TEST_CASE("maxpool refuses padding beyond half the kernel") {
  double dummy = 0.0;
  int32_t index = 0;
  CHECK_THROWS_WITH_AS(
      cpu::maxpool_forward<double>(pool_shape(1, 1, 5, 5, 2, 1, 2), &dummy, &dummy, &index),
      doctest::Contains("more than half the kernel"), Error);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("global average pooling: the plane mean, and its gradient") {
  Rng rng(61);
  const int batch = 2, channels = 3, spatial = 7 * 5;
  auto x = random_uniform<double>(rng, size_t(batch) * channels * spatial);
  const auto pool = [&] {
    auto y = nan_filled<double>(size_t(batch) * channels);
    cpu::global_avgpool_forward<double>(batch, channels, spatial, x.data(), y.data());
    return y;
  };
  const auto y = pool();
  for (int p = 0; p < batch * channels; ++p) {
    double sum = 0.0;
    for (int i = 0; i < spatial; ++i) sum += x[size_t(p) * spatial + i];
    CHECK(y[p] == doctest::Approx(sum / spatial).epsilon(1e-14));
  }
  const auto upstream = random_uniform<double>(rng, y.size());
  auto dx = nan_filled<double>(x.size());
  cpu::global_avgpool_backward<double>(batch, channels, spatial, upstream.data(), dx.data());
  const auto report =
      check_gradients([&] { return dot(pool(), upstream); }, {gradient_input("x", x, dx)});
  CHECK_MESSAGE(report.passed(), report.summary());
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("linear: forward as nn.Linear, and dx, dw, db by central differences") {
  Rng rng(71);
  const int batch = 3, in = 13, out = 5;
  auto x = random_uniform<double>(rng, size_t(batch) * in);
  auto w = random_uniform<double>(rng, size_t(out) * in);
  auto b = random_uniform<double>(rng, out);
  const auto linear = [&] {
    auto y = nan_filled<double>(size_t(batch) * out);
    cpu::linear_forward<double>(batch, in, out, x.data(), w.data(), b.data(), y.data());
    return y;
  };
  const auto y = linear();
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) {
      double expected = b[o];
      for (int i = 0; i < in; ++i) expected += x[size_t(n) * in + i] * w[size_t(o) * in + i];
      CHECK(y[size_t(n) * out + o] == doctest::Approx(expected).epsilon(1e-13));
    }

  const auto upstream = random_uniform<double>(rng, y.size());
  auto dx = nan_filled<double>(x.size()), dw = nan_filled<double>(w.size());
  auto db = nan_filled<double>(b.size());
  cpu::linear_backward<double>(batch, in, out, x.data(), w.data(), upstream.data(), dx.data(),
                               dw.data(), db.data());
  const auto report = check_gradients(
      [&] { return dot(linear(), upstream); },
      {gradient_input("x", x, dx), gradient_input("w", w, dw), gradient_input("b", b, db)});
  CHECK_MESSAGE(report.passed(), report.summary());

  // Without dx, dw and db come out the same.
  auto dw_only = nan_filled<double>(w.size());
  auto db_only = nan_filled<double>(b.size());
  cpu::linear_backward<double>(batch, in, out, x.data(), w.data(), upstream.data(), nullptr,
                               dw_only.data(), db_only.data());
  CHECK(dw_only == dw);
  CHECK(db_only == db);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("add: gradient is the upstream gradient for both inputs, and z may alias x") {
  Rng rng(81);
  auto x = random_uniform<double>(rng, 50), y = random_uniform<double>(rng, 50);
  const auto upstream = random_uniform<double>(rng, 50);
  const auto sum = [&] {
    auto z = nan_filled<double>(x.size());
    cpu::add<double>(int64_t(x.size()), x.data(), y.data(), z.data());
    return z;
  };
  // add has no backward of its own: the residual connection hands dz to both branches.
  const auto report = check_gradients([&] { return dot(sum(), upstream); },
                                      {gradient_input("x", x, upstream),
                                       gradient_input("y", y, upstream)});
  CHECK_MESSAGE(report.passed(), report.summary());

  std::vector<double> in_place = x;
  cpu::add<double>(int64_t(x.size()), in_place.data(), y.data(), in_place.data());
  for (size_t i = 0; i < x.size(); ++i) CHECK(in_place[i] == x[i] + y[i]);
}
