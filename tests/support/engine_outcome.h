#pragma once
// What a short training run leaves in an engine, and the check that two runs left the same bits,
// for the tests that train one setting two ways (tests/unit/test_engine_pixel_input.cpp,
// tests/gpu/test_cuda_pixel_input.cpp).
#include <doctest/doctest.h>

#include <cstring>
#include <utility>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"
#include "support/test_tensors.h"

namespace rddp::testing {

// A narrow ResNet-18 on 8x8 images for the CPU engine: every layer, little arithmetic.
inline EngineConfig narrow_cpu_config() {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.num_classes = 5;
  config.spec.widths = {4, 8, 8, 8};
  config.max_batch = 3;
  config.height = config.width = 8;
  return config;
}

struct EngineOutcome {
  explicit EngineOutcome(const ModelSpec& spec) : model(spec) {}
  ModelState<float> model;
  OptimizerState optimizer;
  Metrics train, eval;  // as take_metrics() returned them after training, then evaluation
};

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

inline void check_same_bits(const EngineOutcome& a, const EngineOutcome& b) {
  CHECK(bitwise_equal(a.model.params, b.model.params));
  CHECK(bitwise_equal(a.model.grads, b.model.grads));
  CHECK(bitwise_equal(a.model.running, b.model.running));
  CHECK(a.model.counters == b.model.counters);
  CHECK(a.optimizer.step_count == b.optimizer.step_count);
  CHECK(bitwise_equal(a.optimizer.first_moment, b.optimizer.first_moment));
  CHECK(bitwise_equal(a.optimizer.second_moment, b.optimizer.second_moment));
  for (const auto& [x, y] : {std::pair{a.train, b.train}, std::pair{a.eval, b.eval}}) {
    CHECK(same_bits(x.loss_sum, y.loss_sum));
    CHECK(x.correct == y.correct);
    CHECK(x.correct_top5 == y.correct_top5);
    CHECK(x.count == y.count);
  }
}

}  // namespace rddp::testing
