#pragma once
// Which training steps of the CUDA engine run from a captured CUDA graph (--cuda-graphs on).
// Plain host logic, no CUDA, so that the CPU tests cover it.
//
// A graph replays the kernels it captured with the arguments it captured, so only a step of
// exactly the captured shape may replay it:
//  - the first kWarmupSteps full-batch steps run eagerly: cuDNN and cuBLAS choose algorithms
//    and set up their workspaces lazily, and none of that may happen inside a capture;
//  - the next full-batch step is captured (and then replayed, since capturing runs nothing);
//  - every later full-batch step replays the graph;
//  - a batch of another size (the smaller last batch of an epoch) runs eagerly, as does any step
//    with StepHooks that cannot be captured (StepHooks::capturable);
//  - a capture that failed turns graphs off for good: every later step runs eagerly.
namespace rddp::cuda {

enum class GraphStepMode { eager, capture, replay };

const char* to_string(GraphStepMode mode);

class GraphStepPolicy {
 public:
  static constexpr int kWarmupSteps = 3;

  // `full_batch`: the only batch size that is captured (the engine's max_batch).
  GraphStepPolicy(bool enabled, int full_batch, int warmup_steps = kWarmupSteps);

  // How the next training step of `batch` images runs. After `capture`, report the outcome
  // with captured() or capture_failed() before asking again.
  // `eager_hooks`: the step has StepHooks that cannot be captured.
  GraphStepMode next(int batch, bool eager_hooks);
  void captured();
  void capture_failed();

  bool enabled() const { return enabled_; }
  bool graph_ready() const { return graph_ready_; }

 private:
  bool enabled_;
  int full_batch_;
  int warmup_steps_;
  int eager_full_steps_ = 0;
  bool graph_ready_ = false;
  bool capturing_ = false;
};

}  // namespace rddp::cuda
