// bench/step_events.h: the throughput benchmark's split of a step into its parts, for an eager
// step and for one replayed from a CUDA graph, whose optimizer events are nodes inside the graph.
// Stand-in work that sleeps gives each part a known least duration; the parts must cover their
// sleeps and add up to the window's time.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "step_events.h"
#include "stream_work.h"

namespace {

constexpr double kForwardMs = 40, kOptimizerMs = 10;

void sleep_on(cudaStream_t stream, double ms) {
  emu::enqueue(stream, [ms] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  });
}

// What an engine's step does with the hooks, eagerly.
void eager_step(rddp::bench::StepEvents& events, cudaStream_t stream, int index) {
  events.begin_step(index);
  events.before_forward();
  sleep_on(stream, kForwardMs);
  events.before_optimizer();
  sleep_on(stream, kOptimizerMs);
  events.end_step();
}

}  // namespace

TEST_CASE("a replayed step is split by the events inside its graph, as an eager one by its own") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  rddp::bench::StepEvents events(2, stream, nullptr);
  REQUIRE(events.capturable());

  // The graph of a step: forward and backward, the hook's events, the optimizer.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  events.capturing(true);
  sleep_on(stream, kForwardMs);
  events.before_optimizer();
  sleep_on(stream, kOptimizerMs);
  events.capturing(false);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  SUBCASE("eager") {
    eager_step(events, stream, 0);
    eager_step(events, stream, 1);
  }
  SUBCASE("replayed after an eager step") {
    eager_step(events, stream, 0);
    events.begin_step(1);
    events.before_forward();
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    events.replayed();
    events.end_step();
  }
  const double window = events.window_ms();
  const rddp::bench::StepSplit split = events.split();
  CHECK(split.forward_backward >= kForwardMs);
  CHECK(split.optimizer >= kOptimizerMs);
  CHECK(split.optimizer < split.forward_backward);
  CHECK(split.data >= 0);
  CHECK(split.exposed_comm >= 0);
  CHECK(split.idle >= 0);
  const double parts =
      split.data + split.forward_backward + split.exposed_comm + split.optimizer + split.idle;
  CHECK(parts * 2 == doctest::Approx(window).epsilon(0.01));

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("a replayed step whose graph events cannot be timed reads not measured, not an error") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  rddp::bench::StepEvents events(1, stream, nullptr);
  // Said to be replayed, but no graph ever recorded the events inside it.
  events.begin_step(0);
  events.before_forward();
  sleep_on(stream, kOptimizerMs);
  events.replayed();
  events.end_step();
  CHECK(events.window_ms() >= kOptimizerMs);
  const rddp::bench::StepSplit split = events.split();
  CHECK(std::isnan(split.forward_backward));
  CHECK(std::isnan(split.optimizer));
  CHECK(std::isnan(split.exposed_comm));
  CHECK(split.data >= 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaStreamDestroy(stream);
}
