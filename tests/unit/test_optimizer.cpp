#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "resnet_ddp/error.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/rng.h"

using namespace rddp;

namespace {

// torch.optim.AdamW's single-tensor update, transcribed plainly in double.
struct ReferenceAdamW {
  double weight_decay, beta1, beta2, eps;
  std::vector<double> exp_avg, exp_avg_sq;
  int step = 0;

  void update(std::vector<double>& params, const std::vector<double>& grads, double lr) {
    if (exp_avg.empty()) exp_avg.assign(params.size(), 0.0), exp_avg_sq.assign(params.size(), 0.0);
    ++step;
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] *= 1 - lr * weight_decay;
      exp_avg[i] = exp_avg[i] * beta1 + (1 - beta1) * grads[i];
      exp_avg_sq[i] = exp_avg_sq[i] * beta2 + (1 - beta2) * grads[i] * grads[i];
      const double denom = std::sqrt(exp_avg_sq[i]) / std::sqrt(bias_correction2) + eps;
      params[i] -= lr / bias_correction1 * exp_avg[i] / denom;
    }
  }
};

// torch.optim.SGD's single-tensor update with dampening 0, transcribed plainly in double,
// including its first step, where the momentum buffer is created as a copy of d.
struct ReferenceSgd {
  double weight_decay, momentum;
  bool nesterov;
  std::optional<std::vector<double>> buffer;

  void update(std::vector<double>& params, const std::vector<double>& grads, double lr) {
    std::vector<double> d = grads;
    if (weight_decay != 0)
      for (size_t i = 0; i < d.size(); ++i) d[i] += weight_decay * params[i];
    if (momentum != 0) {
      if (!buffer) {
        buffer = d;
      } else {
        for (size_t i = 0; i < d.size(); ++i) (*buffer)[i] = (*buffer)[i] * momentum + d[i];
      }
      for (size_t i = 0; i < d.size(); ++i)
        d[i] = nesterov ? d[i] + momentum * (*buffer)[i] : (*buffer)[i];
    }
    for (size_t i = 0; i < d.size(); ++i) params[i] -= lr * d[i];
  }
};

std::vector<double> normal_values(Rng& rng, size_t count, double scale) {
  std::vector<double> values(count);
  for (double& v : values) v = scale * rng.normal();
  return values;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// The values as T holds them, so that the optimizer and the reference start from the same ones.
template <typename T>
std::vector<double> rounded_to(const std::vector<double>& values) {
  const std::vector<T> rounded = cast<T>(values);
  return std::vector<double>(rounded.begin(), rounded.end());
}

// In double the optimizer and the reference round differently only where the compiler
// contracts a*b+c into one instruction, a few units in the last place per step. In float each
// step adds ~10 roundings of 2^-24 to every value, so 5 steps stay well inside 1e-5; the
// absolute term covers values that cancel to far below the size of their terms.
template <typename T>
void check_close(const std::vector<T>& got, const std::vector<double>& want, const char* what) {
  const double unit = std::is_same_v<T, float> ? FLT_EPSILON : DBL_EPSILON;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= 100 * unit * std::abs(want[i]) + 10 * unit * scale))
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", reference " << want[i]);
  }
}

const double kLearningRates[] = {1e-2, 3e-2, 5e-3, 0.0, 2e-2};  // a schedule that moves

template <typename T>
void check_adamw(double weight_decay) {
  OptimizerConfig config;
  config.kind = OptimizerKind::adamw;
  config.weight_decay = weight_decay;
  const size_t elements = 300;
  Rng rng(derive_seed(42, "adamw"));
  std::vector<double> params = rounded_to<T>(normal_values(rng, elements, 1.0));
  std::vector<T> got = cast<T>(params);
  CpuOptimizer<T> optimizer(config, elements);
  ReferenceAdamW reference{weight_decay, config.beta1, config.beta2, config.eps, {}, {}, 0};
  for (double lr : kLearningRates) {
    const std::vector<double> exact_grads = rounded_to<T>(normal_values(rng, elements, 0.1));
    const std::vector<T> grads = cast<T>(exact_grads);
    optimizer.step(got.data(), grads.data(), lr);
    reference.update(params, exact_grads, lr);
  }
  CHECK(optimizer.step_count() == 5);
  check_close(got, params, "params");
  check_close(optimizer.first_moment(), reference.exp_avg, "exp_avg");
  check_close(optimizer.second_moment(), reference.exp_avg_sq, "exp_avg_sq");
}

template <typename T>
void check_sgd(double momentum, bool nesterov, double weight_decay) {
  OptimizerConfig config;
  config.kind = OptimizerKind::sgd;
  config.momentum = momentum;
  config.nesterov = nesterov;
  config.weight_decay = weight_decay;
  const size_t elements = 300;
  Rng rng(derive_seed(43, "sgd"));
  std::vector<double> params = rounded_to<T>(normal_values(rng, elements, 1.0));
  std::vector<T> got = cast<T>(params);
  CpuOptimizer<T> optimizer(config, elements);
  CHECK(optimizer.first_moment().size() == (momentum != 0 ? elements : 0));
  ReferenceSgd reference{weight_decay, momentum, nesterov, std::nullopt};
  for (double lr : kLearningRates) {
    const std::vector<double> exact_grads = rounded_to<T>(normal_values(rng, elements, 1.0));
    const std::vector<T> grads = cast<T>(exact_grads);
    optimizer.step(got.data(), grads.data(), lr);
    reference.update(params, exact_grads, lr);
  }
  check_close(got, params, "params");
  if (momentum != 0) check_close(optimizer.first_moment(), *reference.buffer, "momentum_buffer");
}

}  // namespace

TEST_CASE("AdamW follows torch.optim.AdamW over steps with a changing learning rate") {
  for (double weight_decay : {0.0, 1e-2, 0.5}) {
    CAPTURE(weight_decay);
    check_adamw<double>(weight_decay);
    check_adamw<float>(weight_decay);
  }
}

TEST_CASE("SGD follows torch.optim.SGD: plain, momentum, nesterov, weight decay") {
  struct Variant {
    double momentum;
    bool nesterov;
    double weight_decay;
  };
  for (const Variant& v : {Variant{0.0, false, 0.0}, Variant{0.0, false, 1e-2},
                           Variant{0.9, false, 0.0}, Variant{0.9, false, 5e-4},
                           Variant{0.9, true, 0.0}, Variant{0.5, true, 1e-2}}) {
    CAPTURE(v.momentum);
    CAPTURE(v.nesterov);
    CAPTURE(v.weight_decay);
    check_sgd<double>(v.momentum, v.nesterov, v.weight_decay);
    check_sgd<float>(v.momentum, v.nesterov, v.weight_decay);
  }
}

TEST_CASE("SGD's zero-initialised momentum buffer equals PyTorch's copy of d after step one") {
  OptimizerConfig config;
  config.kind = OptimizerKind::sgd;
  config.momentum = 0.9;
  config.weight_decay = 0.0;
  Rng rng(5);
  std::vector<float> params = cast<float>(normal_values(rng, 64, 1.0));
  std::vector<float> grads = cast<float>(normal_values(rng, 64, 1.0));
  grads[0] = 0.0f;
  grads[1] = std::numeric_limits<float>::denorm_min();
  CpuOptimizer<float> optimizer(config, params.size());
  optimizer.step(params.data(), grads.data(), 0.1);
  // momentum * 0 + g is exactly g: bit for bit what torch.clone(d) gives.
  CHECK(optimizer.first_moment() == grads);
}

TEST_CASE("the step count resumes the bias corrections where they were") {
  OptimizerConfig config;  // AdamW
  Rng rng(9);
  const std::vector<double> start = normal_values(rng, 16, 1.0);
  const std::vector<double> grads = normal_values(rng, 16, 0.1);
  // Step 3 of a run restored with its moments and count, against three straight steps.
  std::vector<double> straight = start, resumed = start;
  CpuOptimizer<double> a(config, 16), b(config, 16);
  for (int step = 0; step < 3; ++step) a.step(straight.data(), grads.data(), 1e-3);
  for (int step = 0; step < 2; ++step) b.step(resumed.data(), grads.data(), 1e-3);
  CpuOptimizer<double> c(config, 16);
  c.set_step_count(b.step_count());
  c.first_moment() = b.first_moment();
  c.second_moment() = b.second_moment();
  c.step(resumed.data(), grads.data(), 1e-3);
  CHECK(c.step_count() == 3);
  CHECK(resumed == straight);
}

TEST_CASE("OptimizerConfig::validate names the bad flag and its range") {
  CHECK_NOTHROW(OptimizerConfig{}.validate());
  // The message validate() throws for the defaults with one change, or "accepted".
  auto verdict = [](auto change) {
    OptimizerConfig config;
    change(config);
    try {
      config.validate();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  auto starts = [](const std::string& text, const std::string& prefix) {
    return text.compare(0, prefix.size(), prefix) == 0;
  };
  CHECK(starts(verdict([](auto& c) { c.lr = 0; }), "--lr must be a finite number > 0, got 0"));
  CHECK(starts(verdict([](auto& c) { c.lr = NAN; }), "--lr must be a finite number > 0"));
  CHECK(starts(verdict([](auto& c) { c.weight_decay = -1e-4; }),
               "--weight-decay must be a finite number >= 0, got -0.0001"));
  CHECK(starts(verdict([](auto& c) { c.beta1 = 1.0; }), "--beta1 must be in [0, 1), got 1"));
  CHECK(starts(verdict([](auto& c) { c.beta2 = -0.1; }), "--beta2 must be in [0, 1), got -0.1"));
  CHECK(starts(verdict([](auto& c) { c.eps = 0; }), "--eps must be a finite number > 0, got 0"));
  CHECK(starts(verdict([](auto& c) { c.momentum = -0.5; }),
               "--momentum must be a finite number >= 0, got -0.5"));
  CHECK(starts(verdict([](auto& c) { c.nesterov = true; }), "--nesterov needs momentum"));
  CHECK(verdict([](auto& c) { c.beta1 = 0; c.beta2 = 0; c.weight_decay = 0; }) == "accepted");
  CHECK(verdict([](auto& c) { c.nesterov = true; c.momentum = 0.9; }) == "accepted");

  OptimizerConfig bad;
  bad.eps = -1;
  CHECK_THROWS_WITH_AS(CpuOptimizer<float>(bad, 4), doctest::Contains("--eps"), Error);
}

TEST_CASE("optimizer names parse, and a bad step learning rate is refused") {
  CHECK(parse_optimizer("adamw") == OptimizerKind::adamw);
  CHECK(parse_optimizer("sgd") == OptimizerKind::sgd);
  CHECK(std::string(to_string(OptimizerKind::sgd)) == "sgd");
  CHECK_THROWS_WITH_AS(parse_optimizer("adam"), doctest::Contains("'adamw'"), Error);

  CpuOptimizer<float> optimizer(OptimizerConfig{}, 4);
  std::vector<float> params(4, 1.0f), grads(4, 1.0f);
  CHECK_THROWS_WITH_AS(optimizer.step(params.data(), grads.data(), -1e-3),
                       doctest::Contains("learning rate"), Error);
  CHECK(optimizer.step_count() == 0);
  CHECK(params == std::vector<float>(4, 1.0f));
}
