#pragma once
// --profile-steps A-B: a profiler started with a capture range (nsys profile
// --capture-range=cudaProfilerApi) collects global steps A to B and nothing else, so that a
// profile of step 1000 needs neither the start-up nor the thousand steps before it. The same
// steps are marked by a "profiled steps A-B" range on the timeline, on the CPU engine too.
#include <cstdint>
#include <optional>
#include <string>

#include "resnet_ddp/engine.h"

namespace rddp {

class ProfilerWindow {
 public:
  // first == 0: no window; nothing is switched.
  ProfilerWindow(Engine& engine, int64_t first, int64_t last);

  // Around each training step, by its global number counted from 1: before the step asks for
  // its batch, and after it returns. A run resumed inside the window starts collecting at its
  // first step.
  void before_step(int64_t step);
  void after_step(int64_t step);
  // At the end of training: stops a collection still on (a run that ended inside the window).
  // Returns a warning when the window held none of the run's steps, else "".
  std::string finish(int64_t first_step_run, int64_t last_step_run);

  bool collecting() const { return span_.has_value(); }
  int64_t steps_collected() const { return steps_collected_; }

 private:
  void stop();

  Engine& engine_;
  int64_t first_, last_;
  std::optional<uint64_t> span_;  // the timeline range's id while collecting
  int64_t steps_collected_ = 0;
};

}  // namespace rddp
