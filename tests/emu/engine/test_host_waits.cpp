// No host synchronisation inside a training step. train_step makes exactly two waits, both on
// copies of its own rather than on the device's computing:
//   - for the batch's copy to have read the host buffer, which the loader then reuses (the
//     contract of Engine::train_step);
//   - for the ring slot of the optimizer's staged scalars, whose last copy was enqueued four
//     steps earlier (cuda/staged_value.h), long done unless the host runs that far ahead;
// and no other call that waits for the device or could: no stream or device synchronisation,
// no blocking copy or set, no allocation or free, no poll. eval_step makes only the first.
// Counted by the emulated runtime (host_waits.h) on this thread, in every precision, layout and
// BatchNorm, for both optimizers, eager and replayed from a CUDA graph (its capture step
// included). A step that read a loss or a flag back to decide on the host (fp16's skipped
// steps, say) would fail here.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "host_waits.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/engine.h"
#include "support/engine_batches.h"
#include "support/engine_outcome.h"

using namespace rddp;

namespace {

struct Variant {
  Precision precision;
  MemoryFormat format;
  BatchNormImpl batchnorm;
  BatchInput input;
  bool graphs;
  OptimizerKind optimizer = OptimizerKind::adamw;
};

std::string describe(const Variant& v) {
  return std::string(to_string(v.precision)) + " " + to_string(v.format) + " " +
         to_string(v.batchnorm) + " " + to_string(v.input) + (v.graphs ? " graphs " : " eager ") +
         to_string(v.optimizer);
}

// Which calls a step makes does not depend on the network's widths or the images' size.
EngineConfig config_of(const Variant& v) {
  EngineConfig config = testing::narrow_cpu_config();
  config.precision = v.precision;
  config.input = v.input;
  if (v.input == BatchInput::pixels) {
    config.pixel_mean = {0.5f, 0.5f, 0.5f};
    config.pixel_stddev = {0.25f, 0.25f, 0.25f};
  }
  config.optimizer.kind = v.optimizer;
  if (v.optimizer == OptimizerKind::sgd) config.optimizer.momentum = 0.9;
  return config;
}

// What this thread waited on during `calls`.
template <typename Calls>
emu::HostWaits waits_during(Calls calls) {
  const emu::HostWaits before = emu::host_waits();
  calls();
  const emu::HostWaits& after = emu::host_waits();
  return {after.stream_syncs - before.stream_syncs,   after.device_syncs - before.device_syncs,
          after.event_syncs - before.event_syncs,     after.blocking_copies - before.blocking_copies,
          after.allocations - before.allocations,     after.polls - before.polls};
}

void check_steps(const Variant& v) {
  CAPTURE(describe(v));
  const EngineConfig config = config_of(v);
  CudaEngineOptions options;
  options.conv_search = cuda::ConvAlgorithmSearch::heuristic;
  options.memory_format = v.format;
  options.batchnorm = v.batchnorm;
  options.cuda_graphs = v.graphs;
  std::unique_ptr<Engine> engine = make_cuda_engine(config, options, /*init_seed=*/3);
  const bool pixels = v.input == BatchInput::pixels;
  const int size = config.max_batch;
  constexpr int kSteps = 6;  // past the graph's eager warm-up and its capture
  for (int step = 0; step < kSteps; ++step) {
    const testing::Batch batch = pixels ? testing::random_pixel_batch(config, size, 100 + step)
                                        : testing::random_batch(config, size, 100 + step);
    const HostBatch view = pixels ? batch.pixel_view() : batch.view();
    const emu::HostWaits waits = waits_during([&] { engine->train_step(view, 0.01, nullptr); });
    CAPTURE(step);
    CHECK(waits.event_syncs == 2);
    CHECK(waits.total() == 2);
  }
  if (v.graphs) CHECK(cuda_graph_stats(*engine).replays == kSteps - 3);
  const testing::Batch eval =
      pixels ? testing::random_pixel_batch(config, size, 7) : testing::random_batch(config, size, 7);
  const emu::HostWaits waits =
      waits_during([&] { engine->eval_step(pixels ? eval.pixel_view() : eval.view()); });
  CHECK(waits.event_syncs == 1);
  CHECK(waits.total() == 1);
  (void)engine->take_metrics();
}

}  // namespace

TEST_CASE("a training step waits for its batch copy and its optimizer scalars' slot only") {
  const BatchInput floats = BatchInput::normalized_float;
  for (const Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16})
    for (const MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc})
      for (const BatchNormImpl batchnorm : {BatchNormImpl::cudnn, BatchNormImpl::fused})
        check_steps({precision, format, batchnorm, floats, false});
  check_steps({Precision::fp16, MemoryFormat::nhwc, BatchNormImpl::fused, floats, false,
               OptimizerKind::sgd});
}

TEST_CASE("so does a step replayed from its CUDA graph, and one with pixel input") {
  const BatchInput floats = BatchInput::normalized_float, pixels = BatchInput::pixels;
  check_steps({Precision::bf16, MemoryFormat::nhwc, BatchNormImpl::fused, pixels, false});
  check_steps({Precision::fp16, MemoryFormat::nhwc, BatchNormImpl::fused, floats, true});
  check_steps({Precision::fp32, MemoryFormat::nchw, BatchNormImpl::cudnn, pixels, true});
  check_steps({Precision::bf16, MemoryFormat::nchw, BatchNormImpl::fused, floats, true,
               OptimizerKind::sgd});
}
