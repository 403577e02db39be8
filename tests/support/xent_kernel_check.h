#pragma once
// The softmax cross-entropy kernel (cuda/kernels.h, kernels/softmax_xent.cu) against its CPU twin
// (src/cpu/softmax_xent.cpp), shared by the GPU test (tests/gpu/test_kernels.cu) and the emulated
// one (tests/emu/test_emulated_softmax_xent.cpp), which run the same checks at their own sizes.
// Outputs are poisoned with NaN before a launch so that an element the kernel forgets to write
// cannot pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/device_array.h"
#include "support/test_tensors.h"

namespace rddp::testing::xent_check {

struct XentOutputs {
  std::vector<float> dlogits;
  cuda::XentMetrics metrics;
};

inline XentOutputs run_xent_kernel(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                            int batch, int classes, float smoothing, const Stream& stream) {
  DeviceArray<float> d_logits(logits.size()), d_dlogits(logits.size());
  DeviceArray<int32_t> d_labels(labels.size());
  DeviceArray<cuda::XentRow> d_rows(batch);
  DeviceArray<cuda::XentMetrics> d_metrics(1);
  d_logits.upload(logits);
  d_labels.upload(labels);
  d_dlogits.poison();
  d_rows.poison();
  d_metrics.poison();
  cuda::softmax_cross_entropy<float>(d_logits.get(), d_labels.get(), batch, classes, smoothing,
                                     d_dlogits.get(), d_rows.get(), d_metrics.get(), stream);
  stream.sync();
  return {d_dlogits.download(), d_metrics.download()[0]};
}

// The kernel and its twin differ only in the order of each row's sums. The twin's sequential
// float sum of C exponentials may be off by C units in the last place (the kernel's, spread
// over 32 or 256 lanes, by far fewer); that error moves log-sum-exp, and so every probability,
// by the same relative amount, and expf/logf add a few ulps more. Hence a relative tolerance of
// (C + 64) ulps on p, i.e. on (p - target) / N up to the 1/N of the target.
inline void check_xent_against_twin(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                             int batch, int classes, float smoothing, double logit_scale,
                             const Stream& stream) {
  const XentOutputs got = run_xent_kernel(logits, labels, batch, classes, smoothing, stream);
  std::vector<float> want(logits.size());
  const cpu::XentResult want_metrics = cpu::softmax_cross_entropy<float>(
      logits.data(), labels.data(), batch, classes, smoothing, want.data());

  const double rel = (classes + 64) * static_cast<double>(FLT_EPSILON);
  CHECK(got.metrics.correct == want_metrics.correct);
  CHECK(got.metrics.correct_top5 == want_metrics.correct_top5);
  CHECK(got.metrics.bad_labels == 0);
  // A row's loss is lse - (1-eps) z_y - eps/C sum z: terms of size up to ~8 * logit_scale.
  CHECK(std::abs(got.metrics.loss - want_metrics.loss) <=
        rel * (1.0 + std::abs(want_metrics.loss) + 8.0 * logit_scale));
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double ref = want[i];
    if (!(std::abs(got.dlogits[i] - ref) <= rel * (std::abs(ref) + 1.0 / batch)) && bad++ < 5)
      FAIL_CHECK("dlogits[" << i << "] (row " << i / classes << ", class " << i % classes
                            << ") = " << got.dlogits[i] << ", CPU twin " << ref);
  }
  CHECK(bad == 0);
}

inline std::vector<int32_t> random_labels(Rng& rng, int batch, int classes) {
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(classes));
  return labels;
}

// Every third row's label moved to its 5th or 6th largest logit, where top-5 is decided (random
// labels of a thousand classes would almost never be).
inline void put_labels_at_top5_edge(const std::vector<float>& logits, int classes,
                                    std::vector<int32_t>& labels) {
  if (classes < 6) return;
  for (size_t n = 1; n < labels.size(); n += 3) {
    const float* x = logits.data() + n * classes;
    std::vector<int> order(classes);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    labels[n] = order[4 + (n / 3) % 2];
  }
}

// Random logits for every batch and class count (with and without label smoothing).
inline void check_random_logits(std::initializer_list<int> batches,
                                std::initializer_list<int> class_counts, const Stream& stream) {
  const float logit_scale = 4.0f;
  for (int batch : batches) {
    for (int classes : class_counts) {
      for (float smoothing : {0.0f, 0.1f}) {
        CAPTURE(batch);
        CAPTURE(classes);
        CAPTURE(smoothing);
        Rng rng(derive_seed(batch * 4099 + classes, smoothing == 0 ? "plain" : "smoothed"));
        const std::vector<float> logits =
            normal_floats(rng, static_cast<size_t>(batch) * classes, logit_scale);
        std::vector<int32_t> labels = random_labels(rng, batch, classes);
        put_labels_at_top5_edge(logits, classes, labels);
        check_xent_against_twin(logits, labels, batch, classes, smoothing, logit_scale, stream);
      }
    }
  }
}

// Ties at the maximum (the first index must win), logits of +-1e4 (finite results) and the
// same bits from a second run.
inline void check_ties_huge_and_bits(int batch, std::initializer_list<int> class_counts,
                                     const Stream& stream) {
  for (int classes : class_counts) {
    CAPTURE(classes);
    Rng rng(derive_seed(classes, "ties"));
    std::vector<float> ties(static_cast<size_t>(batch) * classes);
    for (float& x : ties) x = static_cast<float>(rng.below(4));
    std::vector<int32_t> labels = random_labels(rng, batch, classes);
    put_labels_at_top5_edge(ties, classes, labels);
    check_xent_against_twin(ties, labels, batch, classes, 0.1f, 4.0, stream);

    std::vector<float> huge(ties.size());
    for (float& x : huge) x = rng.uniform() < 0.5 ? -1e4f : 1e4f;
    const XentOutputs got = run_xent_kernel(huge, labels, batch, classes, 0.1f, stream);
    CHECK(std::isfinite(got.metrics.loss));
    CHECK(std::all_of(got.dlogits.begin(), got.dlogits.end(),
                      [](float g) { return std::isfinite(g); }));
    check_xent_against_twin(huge, labels, batch, classes, 0.1f, 1e4, stream);

    const std::vector<float> logits = normal_floats(rng, ties.size(), 4.0);
    const XentOutputs first = run_xent_kernel(logits, labels, batch, classes, 0.1f, stream);
    const XentOutputs second = run_xent_kernel(logits, labels, batch, classes, 0.1f, stream);
    CHECK(bitwise_equal(first.dlogits, second.dlogits));
    CHECK(first.metrics.loss == second.metrics.loss);  // no atomics: the same bits every time
  }
}

// Labels outside [0, classes) are counted, make the loss NaN and leave the good rows' gradients
// finite; a label smoothing outside [0, 1] is refused.
inline void check_bad_labels(const Stream& stream) {
  const int batch = 4;
  for (int classes : {10, 300}) {  // a warp per row, a block per row
    CAPTURE(classes);
    Rng rng(3);
    const std::vector<float> logits = normal_floats(rng, batch * classes, 1.0);
    const std::vector<int32_t> labels = {5, -1, classes, 7};
    const XentOutputs got = run_xent_kernel(logits, labels, batch, classes, 0.0f, stream);
    CHECK(got.metrics.bad_labels == 2);
    CHECK(std::isnan(got.metrics.loss));
    // Only the good rows count as correct.
    std::vector<float> good_logits(logits.begin(), logits.begin() + classes);
    good_logits.insert(good_logits.end(), logits.begin() + 3 * classes, logits.end());
    const std::vector<int32_t> good_labels = {labels[0], labels[3]};
    const cpu::XentResult good = cpu::softmax_cross_entropy<float>(
        good_logits.data(), good_labels.data(), 2, classes, 0.0f, nullptr);
    CHECK(got.metrics.correct == good.correct);
    CHECK(got.metrics.correct_top5 == good.correct_top5);
    // The good rows are written (the poison is NaN); the bad ones are NaN either way.
    CHECK(std::all_of(got.dlogits.begin(), got.dlogits.begin() + classes,
                      [](float g) { return std::isfinite(g); }));
    CHECK(std::all_of(got.dlogits.begin() + 3 * classes, got.dlogits.end(),
                      [](float g) { return std::isfinite(g); }));
    CHECK_THROWS_AS(run_xent_kernel(logits, labels, batch, classes, 1.5f, stream), Error);
  }
}

}  // namespace rddp::testing::xent_check
