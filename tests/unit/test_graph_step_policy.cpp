// Which training steps may replay a captured CUDA graph (cuda/graph_step_policy.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using cuda::GraphStepMode;
using cuda::GraphStepPolicy;

namespace {

// The modes of a run of steps of the given sizes, every capture succeeding (or failing).
std::vector<std::string> modes(GraphStepPolicy& policy, const std::vector<int>& batches,
                               bool captures_succeed = true) {
  std::vector<std::string> out;
  for (int batch : batches) {
    const GraphStepMode mode = policy.next(batch, /*eager_hooks=*/false);
    out.push_back(cuda::to_string(mode));
    if (mode == GraphStepMode::capture) {
      if (captures_succeed) policy.captured();
      else policy.capture_failed();
    }
  }
  return out;
}

using Modes = std::vector<std::string>;

}  // namespace

TEST_CASE("graphs off: every step is eager") {
  GraphStepPolicy policy(false, 8);
  CHECK(modes(policy, {8, 8, 8, 8, 8, 8}) == Modes(6, "eager"));
}

TEST_CASE("warm-up steps run eagerly, then one capture, then replays") {
  GraphStepPolicy policy(true, 8, 2);
  CHECK(modes(policy, {8, 8, 8, 8, 8}) == Modes{"eager", "eager", "capture", "replay", "replay"});
  CHECK(policy.graph_ready());
}

TEST_CASE("the default warm-up is kWarmupSteps eager steps") {
  GraphStepPolicy policy(true, 4);
  Modes expected(GraphStepPolicy::kWarmupSteps, "eager");
  expected.push_back("capture");
  expected.push_back("replay");
  std::vector<int> batches(expected.size(), 4);
  CHECK(modes(policy, batches) == expected);
}

TEST_CASE("a smaller batch runs eagerly and counts for no warm-up") {
  GraphStepPolicy policy(true, 8, 2);
  // Epochs of 8, 8, 3: the 3s stay eager before and after the capture.
  CHECK(modes(policy, {8, 3, 8, 8, 3, 8, 8, 3}) ==
        Modes{"eager", "eager", "eager", "capture", "eager", "replay", "replay", "eager"});
}

TEST_CASE("a step with hooks that cannot be captured runs eagerly, even once the graph is ready") {
  GraphStepPolicy policy(true, 8, 1);
  CHECK(policy.next(8, /*eager_hooks=*/true) == GraphStepMode::eager);
  CHECK(policy.next(8, false) == GraphStepMode::eager);
  CHECK(policy.next(8, true) == GraphStepMode::eager);
  REQUIRE(policy.next(8, false) == GraphStepMode::capture);
  policy.captured();
  CHECK(policy.next(8, true) == GraphStepMode::eager);
  CHECK(policy.next(8, false) == GraphStepMode::replay);
}

TEST_CASE("a failed capture turns graphs off for good") {
  GraphStepPolicy policy(true, 8, 1);
  CHECK(modes(policy, {8, 8, 8, 8}, /*captures_succeed=*/false) ==
        Modes{"eager", "capture", "eager", "eager"});
  CHECK_FALSE(policy.enabled());
  CHECK_FALSE(policy.graph_ready());
}

TEST_CASE("asking again before reporting the capture's outcome is refused") {
  GraphStepPolicy policy(true, 8, 1);
  policy.next(8, false);
  REQUIRE(policy.next(8, false) == GraphStepMode::capture);
  CHECK_THROWS_AS(policy.next(8, false), Error);
}

TEST_CASE("bad settings are refused") {
  CHECK_THROWS_AS(GraphStepPolicy(true, 0), Error);
  CHECK_THROWS_AS(GraphStepPolicy(true, 8, 0), Error);
}
