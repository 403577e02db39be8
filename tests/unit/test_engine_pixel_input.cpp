// BatchInput::pixels on the CPU engine: uint8 batches normalised by the engine train and
// evaluate as the same batches normalised by the loader, bit for bit; and the errors of a
// configuration or a batch that does not fit.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_state.h"
#include "support/engine_batches.h"
#include "support/test_tensors.h"

using namespace rddp;
using testing::bitwise_equal;
using testing::random_pixel_batch;

namespace {

// A narrow ResNet-18 on 8x8 images: every layer, little arithmetic.
EngineConfig narrow_config(BatchInput input) {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.num_classes = 5;
  config.spec.widths = {4, 8, 8, 8};
  config.max_batch = 3;
  config.height = config.width = 8;
  config.precision = Precision::fp32;
  config.input = input;
  config.pixel_mean = {0.485f, 0.456f, 0.406f};
  config.pixel_stddev = {0.229f, 0.224f, 0.225f};
  return config;
}

struct Outcome {
  explicit Outcome(const ModelSpec& spec) : model(spec) {}
  ModelState<float> model;
  OptimizerState optimizer;
  Metrics train, eval;
};

Outcome train(BatchInput input) {
  const EngineConfig config = narrow_config(input);
  std::unique_ptr<Engine> engine = make_cpu_engine(config, 3);
  for (int step = 0; step < 3; ++step) {
    const testing::Batch batch = random_pixel_batch(config, step == 2 ? 2 : 3, 10 + step);
    engine->train_step(input == BatchInput::pixels ? batch.pixel_view() : batch.view(), 1e-2,
                       nullptr);
  }
  Outcome outcome(config.spec);
  outcome.train = engine->take_metrics();
  const testing::Batch eval = random_pixel_batch(config, 3, 77);
  engine->eval_step(input == BatchInput::pixels ? eval.pixel_view() : eval.view());
  outcome.eval = engine->take_metrics();
  engine->save_state(outcome.model, outcome.optimizer);
  return outcome;
}

}  // namespace

TEST_CASE("the CPU engine trains on pixel batches as on the loader's float batches, bit for bit") {
  const Outcome floats = train(BatchInput::normalized_float);
  const Outcome pixels = train(BatchInput::pixels);
  CHECK(bitwise_equal(floats.model.params, pixels.model.params));
  CHECK(bitwise_equal(floats.model.grads, pixels.model.grads));
  CHECK(bitwise_equal(floats.model.running, pixels.model.running));
  CHECK(bitwise_equal(floats.optimizer.first_moment, pixels.optimizer.first_moment));
  CHECK(bitwise_equal(floats.optimizer.second_moment, pixels.optimizer.second_moment));
  CHECK(std::memcmp(&floats.train.loss_sum, &pixels.train.loss_sum, sizeof(double)) == 0);
  CHECK(std::memcmp(&floats.eval.loss_sum, &pixels.eval.loss_sum, sizeof(double)) == 0);
  CHECK(floats.train.count == 8);
  CHECK(pixels.train.count == 8);
  CHECK(floats.train.correct == pixels.train.correct);
  CHECK(floats.eval.correct == pixels.eval.correct);
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
