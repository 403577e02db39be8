#include "resnet_ddp/train/profiler_window.h"

#include "resnet_ddp/profile_range.h"

namespace rddp {

ProfilerWindow::ProfilerWindow(Engine& engine, int64_t first, int64_t last)
    : engine_(engine), first_(first), last_(last) {}

void ProfilerWindow::before_step(int64_t step) {
  if (first_ == 0 || span_ || step < first_ || step > last_) return;
  span_ = start_profile_span("profiled steps " + std::to_string(first_) + "-" + std::to_string(last_));
  engine_.profiler_capture(true);
}

void ProfilerWindow::after_step(int64_t step) {
  if (!span_) return;
  ++steps_collected_;
  if (step >= last_) stop();
}

std::string ProfilerWindow::finish(int64_t first_step_run, int64_t last_step_run) {
  if (span_) stop();
  if (first_ == 0 || steps_collected_ > 0) return "";
  const std::string window = std::to_string(first_) + "-" + std::to_string(last_);
  if (last_step_run < first_step_run)
    return "--profile-steps " + window + ": the run trained no step, so the profiler collected nothing";
  return "--profile-steps " + window + ": this run trained global steps " + std::to_string(first_step_run) + " to " +
         std::to_string(last_step_run) + ", none of them in the window, so the profiler collected nothing";
}

void ProfilerWindow::stop() {
  // The engine waits for the steps' device work before collection stops, so it is all inside.
  engine_.profiler_capture(false);
  end_profile_span(*span_);
  span_.reset();
}

}  // namespace rddp
