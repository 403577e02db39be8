#include "resnet_ddp/cuda/graph_step_policy.h"

#include "resnet_ddp/error.h"

namespace rddp::cuda {

const char* to_string(GraphStepMode mode) {
  switch (mode) {
    case GraphStepMode::eager: return "eager";
    case GraphStepMode::capture: return "capture";
    case GraphStepMode::replay: return "replay";
  }
  return "?";
}

GraphStepPolicy::GraphStepPolicy(bool enabled, int full_batch, int warmup_steps)
    : enabled_(enabled), full_batch_(full_batch), warmup_steps_(warmup_steps) {
  if (full_batch < 1) fail("internal error: a CUDA graph needs a batch of >= 1 images, got ", full_batch);
  if (warmup_steps < 1)
    fail("internal error: CUDA graphs need >= 1 eager warm-up step before the capture, got ", warmup_steps);
}

GraphStepMode GraphStepPolicy::next(int batch, bool eager_hooks) {
  if (capturing_)
    fail("internal error: the CUDA graph's capture was neither reported done nor failed; please report this");
  if (!enabled_ || eager_hooks || batch != full_batch_) return GraphStepMode::eager;
  if (graph_ready_) return GraphStepMode::replay;
  if (eager_full_steps_ < warmup_steps_) {
    ++eager_full_steps_;
    return GraphStepMode::eager;
  }
  capturing_ = true;
  return GraphStepMode::capture;
}

void GraphStepPolicy::captured() {
  RDDP_ASSERT(capturing_);
  capturing_ = false;
  graph_ready_ = true;
}

void GraphStepPolicy::capture_failed() {
  RDDP_ASSERT(capturing_);
  capturing_ = false;
  enabled_ = false;
}

}  // namespace rddp::cuda
