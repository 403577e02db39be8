// replica_fingerprint: what the ranks' comparison covers. Every part that must be equal on
// every rank (a parameter, either optimizer moment, the step count) changes it; BatchNorm's
// running statistics, which each rank updates from its own batch, do not.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/train/replica_check.h"
#include "support/engine_batches.h"
#include "support/engine_outcome.h"

using namespace rddp;

namespace {

// The fingerprint of a trained engine's state after `edit` changed it, loaded into the engine.
uint32_t fingerprint_after(const std::function<void(ModelState<float>&, OptimizerState&)>& edit) {
  const EngineConfig config = testing::narrow_cpu_config();
  std::unique_ptr<Engine> engine = make_cpu_engine(config, 5);
  for (int step = 0; step < 2; ++step)
    engine->train_step(testing::random_batch(config, 3, 40 + step).view(), 1e-2, nullptr);
  ModelState<float> model(config.spec);
  OptimizerState optimizer;
  engine->save_state(model, optimizer);
  edit(model, optimizer);
  engine->load_state(model, &optimizer);
  ModelState<float> loaded(config.spec);
  OptimizerState loaded_optimizer;
  engine->save_state(loaded, loaded_optimizer);
  return replica_fingerprint(loaded, loaded_optimizer);
}

float next_up(float value) { return std::nextafter(value, INFINITY); }

}  // namespace

TEST_CASE("the replica fingerprint covers parameters, moments and step count, not running statistics") {
  const auto unchanged = [](ModelState<float>&, OptimizerState&) {};
  const uint32_t base = fingerprint_after(unchanged);
  CHECK(fingerprint_after(unchanged) == base);

  CHECK(fingerprint_after([](ModelState<float>& model, OptimizerState&) {
          model.params.back() = next_up(model.params.back());
        }) != base);
  CHECK(fingerprint_after([](ModelState<float>&, OptimizerState& optimizer) {
          REQUIRE(!optimizer.first_moment.empty());
          optimizer.first_moment[0] = next_up(optimizer.first_moment[0]);
        }) != base);
  CHECK(fingerprint_after([](ModelState<float>&, OptimizerState& optimizer) {
          REQUIRE(!optimizer.second_moment.empty());
          optimizer.second_moment.back() = next_up(optimizer.second_moment.back());
        }) != base);
  CHECK(fingerprint_after([](ModelState<float>&, OptimizerState& optimizer) { ++optimizer.step_count; }) != base);

  CHECK(fingerprint_after([](ModelState<float>& model, OptimizerState&) {
          for (float& value : model.running) value += 1.0f;
        }) == base);
}
