// kernels/metrics.cu run on the CPU through the emulator (README.md): the running sums the CUDA
// engine keeps on the device against what the CPU engine records for the same steps
// (CpuEngine::record in src/cpu/cpu_engine.cpp: each step's mean loss times its batch, its
// correct rows and its batch), bit for bit after every step; and under float16 loss scaling
// (drop_nonfinite) a step whose loss is NaN or Inf counted apart, as include/resnet_ddp/engine.h
// promises.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"

using namespace rddp;
using namespace rddp::testing;

namespace {

struct Step {
  cuda::XentMetrics metrics;  // as softmax_cross_entropy leaves them on the device
  int batch;
};

// Sums as the CUDA engine expects them: the CPU engine's Metrics, and the counts it has no
// field for.
struct Expected {
  Metrics metrics;
  int64_t bad_labels = 0;
};

void record(Expected& want, const Step& step, bool drop_nonfinite) {
  want.bad_labels += step.metrics.bad_labels;
  if (drop_nonfinite && !std::isfinite(step.metrics.loss)) {
    ++want.metrics.nonfinite_losses;
    return;
  }
  // CpuEngine::record.
  Metrics recorded;
  recorded.loss_sum = step.metrics.loss * step.batch;
  recorded.correct = step.metrics.correct;
  recorded.correct_top5 = step.metrics.correct_top5;
  recorded.count = step.batch;
  want.metrics += recorded;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Runs the steps through accumulate_metrics from zeroed sums, as the engine starts them, and
// compares the sums with the CPU engine's after every step. Returns the device's last sums.
cuda::MetricSums check_steps(const std::vector<Step>& steps, bool drop_nonfinite) {
  CAPTURE(drop_nonfinite);
  cuda::DeviceBuffer<cuda::MetricSums> sums(1);
  RDDP_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0, sums.bytes(), nullptr));
  Expected want;
  cuda::MetricSums got{};
  for (size_t k = 0; k < steps.size(); ++k) {
    CAPTURE(k);
    const auto step = to_device(std::vector{steps[k].metrics}, nullptr);
    cuda::accumulate_metrics(step.get(), steps[k].batch, sums.get(), nullptr, drop_nonfinite);
    record(want, steps[k], drop_nonfinite);
    got = to_host(sums, nullptr)[0];
    CHECK_MESSAGE(same_bits(got.loss_sum, want.metrics.loss_sum),
                  got.loss_sum << " against " << want.metrics.loss_sum);
    CHECK(got.correct == want.metrics.correct);
    CHECK(got.correct_top5 == want.metrics.correct_top5);
    CHECK(got.count == want.metrics.count);
    CHECK(got.bad_labels == want.bad_labels);
    CHECK(got.nonfinite_losses == want.metrics.nonfinite_losses);
  }
  return got;
}

// Mean losses that round when weighted by their batch, batches from one row to 256.
std::vector<Step> finite_steps() {
  Rng rng(23);
  std::vector<Step> steps;
  for (int batch : {1, 7, 128, 256, 3, 64}) {
    const double loss = rng.uniform(0.01, 4.0);
    const auto correct = static_cast<int64_t>(rng.below(static_cast<uint64_t>(batch) + 1));
    const auto correct_top5 =
        correct + static_cast<int64_t>(rng.below(static_cast<uint64_t>(batch - correct) + 1));
    steps.push_back({{loss, correct, correct_top5, 0}, batch});
  }
  steps[3].metrics.bad_labels = 2;  // the engine refuses them later; the sums still count them
  return steps;
}

}  // namespace

TEST_CASE("emulated accumulate_metrics sums the steps as the CPU engine records them") {
  for (bool drop_nonfinite : {false, true}) check_steps(finite_steps(), drop_nonfinite);
}

TEST_CASE("emulated accumulate_metrics with a non-finite loss: kept, or counted apart") {
  std::vector<Step> steps = finite_steps();
  steps[1].metrics.loss = std::numeric_limits<double>::quiet_NaN();
  steps[1].metrics.bad_labels = 1;  // counted even when the loss is left out
  steps[4].metrics.loss = std::numeric_limits<double>::infinity();
  steps[5].metrics.loss = -std::numeric_limits<double>::infinity();
  // Without drop_nonfinite the NaN reaches the loss sum, as in the CPU engine.
  const cuda::MetricSums kept = check_steps(steps, false);
  CHECK(std::isnan(kept.loss_sum));
  CHECK(kept.count == 1 + 7 + 128 + 256 + 3 + 64);
  CHECK(kept.nonfinite_losses == 0);
  // With it, three steps are left out of loss, the counts of correct rows and count, and only
  // counted.
  const cuda::MetricSums dropped = check_steps(steps, true);
  CHECK(std::isfinite(dropped.loss_sum));
  CHECK(dropped.count == 1 + 128 + 256);
  CHECK(dropped.nonfinite_losses == 3);
  CHECK(dropped.bad_labels == 3);
}
