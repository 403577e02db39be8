// --cuda-graphs: N training steps replayed from a captured CUDA graph leave exactly the bits that
// N eager steps leave (parameters, gradients, running statistics, moments, step counts, loss
// scale, metrics), with deterministic cuDNN algorithms, for AdamW and SGD, in float32 and under
// fp16's loss scaling, across learning-rate changes and with a smaller last batch each epoch.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/rng.h"

using namespace rddp;

namespace {

constexpr int kBatch = 8, kLastBatch = 5, kClasses = 10;

EngineConfig graph_config(OptimizerKind optimizer, Precision precision) {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.num_classes = kClasses;
  // A quarter of ResNet-18's widths: what a replay must reproduce does not depend on them, and
  // the emulated engine (tests/emu) runs these 144 steps in CI on the CPU, where the work per
  // parameter and per convolution took four minutes at full width.
  config.spec.widths = {16, 32, 64, 128};
  config.max_batch = kBatch;
  config.height = config.width = 32;
  config.label_smoothing = 0.1;
  config.precision = precision;
  config.optimizer.kind = optimizer;
  if (optimizer == OptimizerKind::sgd) {
    config.optimizer.lr = 0.05;
    config.optimizer.momentum = 0.9;
    config.optimizer.weight_decay = 1e-4;
  }
  return config;
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int size = 0;
  HostBatch view() const {
    return HostBatch{size, 3, 32, 32, images.data(), labels.data(), nullptr};
  }
};

Batch random_batch(int size, uint64_t seed) {
  Batch batch;
  batch.size = size;
  Rng rng(derive_seed(seed, "graph batch"));
  batch.images.resize(static_cast<size_t>(size) * 3 * 32 * 32);
  for (float& x : batch.images) x = static_cast<float>(rng.normal());
  for (int i = 0; i < size; ++i) batch.labels.push_back(static_cast<int32_t>(rng.below(kClasses)));
  return batch;
}

struct Outcome {
  explicit Outcome(const ModelSpec& spec) : model(spec) {}
  ModelState<float> model;
  OptimizerState optimizer;
  std::vector<Metrics> metrics;
  CudaGraphStats stats;
};

// Three epochs of five full batches and a smaller last one, with a learning rate that changes
// every step (as a warm-up or cosine schedule does), metrics taken at each epoch's end. Every
// batch is a fresh host buffer, as the loader's ring hands out different ones.
Outcome train(OptimizerKind optimizer, Precision precision, bool graphs, BatchNormImpl batchnorm) {
  const EngineConfig config = graph_config(optimizer, precision);
  CudaEngineOptions options;
  options.deterministic = true;
  options.conv_search = cuda::ConvAlgorithmSearch::heuristic;
  options.memory_format = precision == Precision::fp16 ? MemoryFormat::nhwc : MemoryFormat::nchw;
  options.cuda_graphs = graphs;
  options.batchnorm = batchnorm;
  std::unique_ptr<Engine> engine = make_cuda_engine(config, options, /*init_seed=*/11);
  Outcome outcome(config.spec);
  int step = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 6; ++i, ++step) {
      const Batch batch = random_batch(i == 5 ? kLastBatch : kBatch, 100 + step);
      const double lr = config.optimizer.lr * (1.0 + 0.1 * step) / (1.0 + 0.05 * step * step);
      engine->train_step(batch.view(), lr, nullptr);
    }
    outcome.metrics.push_back(engine->take_metrics());
  }
  engine->save_state(outcome.model, outcome.optimizer);
  outcome.stats = cuda_graph_stats(*engine);
  return outcome;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_identical(OptimizerKind optimizer, Precision precision,
                     BatchNormImpl batchnorm = BatchNormImpl::cudnn) {
  CAPTURE(to_string(optimizer));
  CAPTURE(to_string(precision));
  CAPTURE(to_string(batchnorm));
  const Outcome eager = train(optimizer, precision, false, batchnorm);
  const Outcome graphed = train(optimizer, precision, true, batchnorm);

  // The graph was really captured and replayed: 3 epochs x 6 steps, of which the 3 smaller
  // batches and the warm-up steps ran eagerly.
  INFO("capture failure: " << graphed.stats.capture_failure);
  REQUIRE(graphed.stats.capture_failure.empty());
  CHECK(graphed.stats.captures == 1);
  CHECK(graphed.stats.graph_nodes > 50);
  CHECK(graphed.stats.eager_steps == 3 + cuda::GraphStepPolicy::kWarmupSteps);
  CHECK(graphed.stats.replays == 18 - graphed.stats.eager_steps);
  CHECK(eager.stats.replays == 0);
  CHECK(eager.stats.eager_steps == 18);

  CHECK(same_bits(eager.model.params, graphed.model.params));
  CHECK(same_bits(eager.model.grads, graphed.model.grads));
  CHECK(same_bits(eager.model.running, graphed.model.running));
  CHECK(eager.model.counters == graphed.model.counters);
  CHECK(same_bits(eager.optimizer.first_moment, graphed.optimizer.first_moment));
  CHECK(same_bits(eager.optimizer.second_moment, graphed.optimizer.second_moment));
  CHECK(eager.optimizer.step_count == graphed.optimizer.step_count);
  CHECK(eager.optimizer.has_loss_scale == graphed.optimizer.has_loss_scale);
  CHECK(eager.optimizer.loss_scale.scale == graphed.optimizer.loss_scale.scale);
  CHECK(eager.optimizer.loss_scale.growth_tracker == graphed.optimizer.loss_scale.growth_tracker);
  REQUIRE(eager.metrics.size() == graphed.metrics.size());
  for (size_t i = 0; i < eager.metrics.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(&eager.metrics[i].loss_sum, &graphed.metrics[i].loss_sum,
                      sizeof(eager.metrics[i].loss_sum)) == 0);
    CHECK(eager.metrics[i].correct == graphed.metrics[i].correct);
    CHECK(eager.metrics[i].correct_top5 == graphed.metrics[i].correct_top5);
    CHECK(eager.metrics[i].count == graphed.metrics[i].count);
    CHECK(eager.metrics[i].count == 5 * kBatch + kLastBatch);
    CHECK(eager.metrics[i].skipped_steps == graphed.metrics[i].skipped_steps);
  }
  // The steps did something: the parameters moved from their initial values.
  ModelState<float> initial(graph_config(optimizer, precision).spec);
  init_torchvision(initial, 11);
  CHECK_FALSE(same_bits(initial.params, graphed.model.params));
}

}  // namespace

TEST_CASE("CUDA graph replays give the bits of eager steps: AdamW, float32") {
  check_identical(OptimizerKind::adamw, Precision::fp32);
}

TEST_CASE("CUDA graph replays give the bits of eager steps: SGD with momentum, float32") {
  check_identical(OptimizerKind::sgd, Precision::fp32);
}

TEST_CASE("CUDA graph replays give the bits of eager steps: AdamW, fp16 with loss scaling") {
  check_identical(OptimizerKind::adamw, Precision::fp16);
}

// Our BatchNorm kernels keep their partial sums in one scratch buffer and reduce in a fixed
// order, so a replay must give the bits of an eager step here too (fp16 runs NHWC).
TEST_CASE("CUDA graph replays give the bits of eager steps: AdamW, fp16, fused BatchNorm") {
  check_identical(OptimizerKind::adamw, Precision::fp16, BatchNormImpl::fused);
}
