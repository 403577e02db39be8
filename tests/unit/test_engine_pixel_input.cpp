// BatchInput::pixels on the CPU engine: uint8 batches normalised by the engine train and
// evaluate as the same batches normalised by the loader, bit for bit; and the errors of a
// configuration or a batch that does not fit.
#include <doctest/doctest.h>

#include <memory>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "support/engine_batches.h"
#include "support/engine_outcome.h"

using namespace rddp;
using testing::random_pixel_batch;

namespace {

EngineConfig narrow_config(BatchInput input) {
  EngineConfig config = testing::narrow_cpu_config();
  config.precision = Precision::fp32;
  config.input = input;
  config.pixel_mean = {0.485f, 0.456f, 0.406f};
  config.pixel_stddev = {0.229f, 0.224f, 0.225f};
  return config;
}

testing::EngineOutcome train(BatchInput input) {
  const EngineConfig config = narrow_config(input);
  std::unique_ptr<Engine> engine = make_cpu_engine(config, 3);
  for (int step = 0; step < 3; ++step) {
    const testing::Batch batch = random_pixel_batch(config, step == 2 ? 2 : 3, 10 + step);
    engine->train_step(input == BatchInput::pixels ? batch.pixel_view() : batch.view(), 1e-2,
                       nullptr);
  }
  testing::EngineOutcome outcome(config.spec);
  outcome.train = engine->take_metrics();
  const testing::Batch eval = random_pixel_batch(config, 3, 77);
  engine->eval_step(input == BatchInput::pixels ? eval.pixel_view() : eval.view());
  outcome.eval = engine->take_metrics();
  engine->save_state(outcome.model, outcome.optimizer);
  return outcome;
}

}  // namespace

TEST_CASE("the CPU engine trains on pixel batches as on the loader's float batches, bit for bit") {
  const testing::EngineOutcome floats = train(BatchInput::normalized_float);
  const testing::EngineOutcome pixels = train(BatchInput::pixels);
  testing::check_same_bits(floats, pixels);
  CHECK(pixels.train.count == 8);
  CHECK(pixels.eval.count == 3);
}

TEST_CASE("a pixel normalisation that does not fit the model is refused by name") {
  EngineConfig config = narrow_config(BatchInput::pixels);
  config.pixel_mean = {0.5f};
  CHECK_THROWS_WITH_AS(make_cpu_engine(config, 1),
                       doctest::Contains("1 means and 3 standard deviations for a model of 3"),
                       Error);
  config = narrow_config(BatchInput::pixels);
  config.pixel_stddev[2] = 0.0f;
  CHECK_THROWS_WITH_AS(make_cpu_engine(config, 1), doctest::Contains("channel 2"), Error);
  // A float engine ignores them.
  config.input = BatchInput::normalized_float;
  CHECK_NOTHROW(make_cpu_engine(config, 1));
}

TEST_CASE("a batch of the other kind than the engine takes is an internal error, not a crash") {
  const EngineConfig config = narrow_config(BatchInput::pixels);
  const testing::Batch batch = random_pixel_batch(config, 3, 1);
  CHECK_THROWS_WITH_AS(check_batch_fits(config, batch.view()),
                       doctest::Contains("configured for pixels batches was given a batch with "
                                         "float images"),
                       Error);
  CHECK_NOTHROW(check_batch_fits(config, batch.pixel_view()));
  const EngineConfig floats = narrow_config(BatchInput::normalized_float);
  CHECK_THROWS_WITH_AS(check_batch_fits(floats, batch.pixel_view()),
                       doctest::Contains("given a batch with uint8 pixels"), Error);
  CHECK_NOTHROW(check_batch_fits(floats, batch.view()));
}
