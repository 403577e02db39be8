// Batches uploaded as uint8 pixels and normalised on the device (BatchInput::pixels, how
// resnet_ddp trains on a GPU) against the same batches normalised by the loader on the host and
// uploaded as floats: the same bits in every parameter, gradient, statistic, moment and metric,
// through training steps (eager, and replayed from a CUDA graph), a short last batch and an
// evaluation. Plus the errors of a pixel normalisation that cannot work.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "support/engine_batches.h"
#include "support/engine_outcome.h"

using namespace rddp;
using testing::Batch;
using testing::random_pixel_batch;

namespace {

constexpr int kBatch = 4;
constexpr int kLastBatch = 3;

struct Setting {
  const char* name;
  Precision precision;
  MemoryFormat format;
  BatchNormImpl batchnorm;
  bool graphs;
};

EngineConfig config_for(const Setting& setting, BatchInput input) {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.num_classes = 10;
  config.max_batch = kBatch;
  config.height = config.width = 32;
  config.precision = setting.precision;
  config.input = input;
  // CIFAR-10's normalisation: every one of its divisions rounds.
  config.pixel_mean = {0.4914f, 0.4822f, 0.4465f};
  config.pixel_stddev = {0.2470f, 0.2435f, 0.2616f};
  return config;
}

struct Outcome : testing::EngineOutcome {
  using EngineOutcome::EngineOutcome;
  CudaGraphStats graphs;
};

// Full batches past the graph's warm-up and capture, one short batch, then an evaluation.
Outcome train(const Setting& setting, BatchInput input) {
  const EngineConfig config = config_for(setting, input);
  CudaEngineOptions options;
  options.deterministic = true;
  options.conv_search = cuda::ConvAlgorithmSearch::heuristic;
  options.memory_format = setting.format;
  options.batchnorm = setting.batchnorm;
  options.cuda_graphs = setting.graphs;
  std::unique_ptr<Engine> engine = make_cuda_engine(config, options, /*init_seed=*/5);
  const auto view = [&](const Batch& batch) {
    return input == BatchInput::pixels ? batch.pixel_view() : batch.view();
  };
  constexpr int kSteps = cuda::GraphStepPolicy::kWarmupSteps + 2;
  for (int step = 0; step <= kSteps; ++step) {
    const Batch batch = random_pixel_batch(config, step == kSteps ? kLastBatch : kBatch, 40 + step);
    engine->train_step(view(batch), 1e-3 * (1 + step), nullptr);
  }
  Outcome outcome(config.spec);
  outcome.train = engine->take_metrics();
  engine->eval_step(view(random_pixel_batch(config, kBatch, 99)));
  outcome.eval = engine->take_metrics();
  engine->save_state(outcome.model, outcome.optimizer);
  outcome.graphs = cuda_graph_stats(*engine);
  return outcome;
}

}  // namespace

TEST_CASE("pixel batches normalised on the device train as float batches normalised on the host") {
  const Setting settings[] = {
      // float32 NCHW reads a float batch where it was uploaded; pixels add the executor's copy.
      {"fp32, nchw, cuDNN BatchNorm", Precision::fp32, MemoryFormat::nchw, BatchNormImpl::cudnn,
       false},
      // The normalisation joins the bfloat16 NHWC conversion, inside the captured graph.
      {"bf16, nhwc, fused BatchNorm, CUDA graphs", Precision::bf16, MemoryFormat::nhwc,
       BatchNormImpl::fused, true},
  };
  for (const Setting& setting : settings) {
    CAPTURE(std::string(setting.name));
    const Outcome floats = train(setting, BatchInput::normalized_float);
    const Outcome pixels = train(setting, BatchInput::pixels);
    if (setting.graphs) {
      INFO("capture failure: " << pixels.graphs.capture_failure);
      REQUIRE(pixels.graphs.capture_failure.empty());
      CHECK(pixels.graphs.replays >= 1);
    }
    testing::check_same_bits(floats, pixels);
    CHECK(pixels.train.count == (cuda::GraphStepPolicy::kWarmupSteps + 2) * kBatch + kLastBatch);
  }
}

TEST_CASE("a pixel normalisation that cannot work is refused by name") {
  const Setting setting{"fp32", Precision::fp32, MemoryFormat::nchw, BatchNormImpl::cudnn, false};
  EngineConfig config = config_for(setting, BatchInput::pixels);
  config.pixel_stddev = {0.2f, 0.2f};
  CHECK_THROWS_WITH_AS(make_cuda_engine(config, CudaEngineOptions{}, 1),
                       doctest::Contains("2 standard deviations for a model of 3 input channels"),
                       Error);
  config.pixel_stddev = {0.2f, 0.0f, 0.2f};
  CHECK_THROWS_WITH_AS(make_cuda_engine(config, CudaEngineOptions{}, 1),
                       doctest::Contains("channel 1"), Error);
}
