// ProfilerWindow: --profile-steps switches the profiler on once before the window's first step
// and off once after its last (or at the end of a run that stops inside it), whatever the run's
// first step, and says so when the run never reaches the window.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/train/profiler_window.h"
#include "support/engine_outcome.h"
#include "support/forwarding_engine.h"

using namespace rddp;

namespace {

// A CPU engine that also notes each switch of the profiler, with the step it came at.
class SwitchLog final : public testing::ForwardingEngine {
 public:
  SwitchLog() : ForwardingEngine(make_cpu_engine(testing::narrow_cpu_config(), 1)) {}
  std::vector<std::string> switches;
  int64_t step = 0;

  void profiler_capture(bool on) override {
    switches.push_back((on ? "on before " : "off after ") + std::to_string(step));
  }
};

struct Run {
  std::vector<std::string> switches;
  int64_t collected = 0;
  std::string warning;
};

// Steps first..last as the trainer runs them; `repeat_before` asks before_step twice for that
// step, as an epoch's end does (its loader has no batch left, and the next epoch asks again).
Run run_steps(int64_t window_first, int64_t window_last, int64_t first, int64_t last, int64_t repeat_before = 0) {
  SwitchLog engine;
  ProfilerWindow window(engine, window_first, window_last);
  for (int64_t step = first; step <= last; ++step) {
    engine.step = step;
    window.before_step(step);
    if (step == repeat_before) window.before_step(step);
    window.after_step(step);
  }
  Run run;
  run.warning = window.finish(first, last);
  run.switches = engine.switches;
  run.collected = window.steps_collected();
  CHECK_FALSE(window.collecting());
  return run;
}

}  // namespace

TEST_CASE("the window's steps, and only those, are collected") {
  const Run run = run_steps(2, 3, 1, 5);
  CHECK(run.switches == std::vector<std::string>{"on before 2", "off after 3"});
  CHECK(run.collected == 2);
  CHECK(run.warning.empty());
}

TEST_CASE("a one-step window, and a window across an epoch's end") {
  CHECK(run_steps(4, 4, 1, 6).switches == std::vector<std::string>{"on before 4", "off after 4"});
  const Run across = run_steps(3, 5, 1, 8, /*repeat_before=*/4);
  CHECK(across.switches == std::vector<std::string>{"on before 3", "off after 5"});
  CHECK(across.collected == 3);
}

TEST_CASE("a run resumed inside the window collects from its first step") {
  const Run run = run_steps(2, 6, 4, 9);
  CHECK(run.switches == std::vector<std::string>{"on before 4", "off after 6"});
  CHECK(run.collected == 3);
}

TEST_CASE("a run that stops inside the window switches the profiler off at its end") {
  const Run run = run_steps(3, 100, 1, 5);
  CHECK(run.switches == std::vector<std::string>{"on before 3", "off after 5"});
  CHECK(run.collected == 3);
  CHECK(run.warning.empty());
}

TEST_CASE("a window the run never reaches switches nothing and says so") {
  const Run late = run_steps(7, 9, 1, 3);
  CHECK(late.switches.empty());
  CHECK(late.warning ==
        "--profile-steps 7-9: this run trained global steps 1 to 3, none of them in the window, so the "
        "profiler collected nothing");
  const Run early = run_steps(1, 2, 5, 8);  // resumed past it
  CHECK(early.switches.empty());
  CHECK(early.warning.find("trained global steps 5 to 8") != std::string::npos);
  CHECK(run_steps(1, 2, 4, 3).warning ==
        "--profile-steps 1-2: the run trained no step, so the profiler collected nothing");
}

TEST_CASE("no window: nothing is switched") {
  const Run run = run_steps(0, 0, 1, 4);
  CHECK(run.switches.empty());
  CHECK(run.warning.empty());
}
