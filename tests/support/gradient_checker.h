#pragma once
// Central-difference gradient checking in double precision.
//
// The checked function is a scalar loss that reads its inputs through pointers the caller
// also hands to the checker: the checker nudges one element at a time by +-step, calls the
// loss, and restores the element bit-exactly. The same call checks one layer (inputs x, w;
// loss = sum(y * r) for random r) or a whole network (inputs: the flat parameter buffer).
//
//   auto report = check_gradients([&] { return loss(); },
//                                 {{"x", x.data(), dx.data(), x.size()}}, options);
//   CHECK_MESSAGE(report.passed(), report.summary());
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/rng.h"

namespace rddp::testing {

// One input of the loss: `values` are perturbed in place (and restored); `gradient` is the
// analytic d(loss)/d(values) under test. Both hold `size` elements.
struct GradientInput {
  std::string name;
  double* values = nullptr;
  const double* gradient = nullptr;
  size_t size = 0;
};

inline GradientInput gradient_input(std::string name, std::vector<double>& values,
                                    const std::vector<double>& gradient) {
  if (values.size() != gradient.size())
    throw std::invalid_argument("gradient_input '" + name + "': " +
                                std::to_string(values.size()) + " values but " +
                                std::to_string(gradient.size()) + " gradient elements");
  return {std::move(name), values.data(), gradient.data(), values.size()};
}

struct GradientCheckOptions {
  // Half-width of the central difference. Its truncation error is O(step^2) and its rounding
  // error O(eps * |loss| / step); 1e-6 balances the two for losses of order 1..100.
  double step = 1e-6;
  // An element passes when |analytic - numeric| <= atol + rtol * |numeric|.
  double atol = 1e-7;
  double rtol = 1e-6;
  // 0 checks every element; otherwise at most this many per input, drawn without
  // replacement from `seed` (for inputs too large to check whole).
  size_t max_points_per_input = 0;
  uint64_t seed = 1;
  size_t max_reported = 8;  // mismatches kept for the summary
};

struct GradientMismatch {
  std::string input;
  size_t index = 0;
  double analytic = 0.0, numeric = 0.0;
};

struct GradientCheckReport {
  size_t checked = 0;
  size_t failed = 0;
  // max over checked elements of |analytic - numeric| / (atol + rtol * |numeric|): the margin
  // by which the check passed (< 1) or failed (> 1).
  double worst_ratio = 0.0;
  std::vector<GradientMismatch> mismatches;  // the first max_reported failures

  bool passed() const { return checked > 0 && failed == 0; }

  std::string summary() const {
    std::ostringstream out;
    out << "gradient check: " << failed << " of " << checked
        << " elements outside tolerance (worst error / tolerance = " << worst_ratio << ")";
    if (checked == 0) out << "; nothing was checked";
    for (const GradientMismatch& m : mismatches)
      out << "\n  " << m.input << "[" << m.index << "]: analytic " << m.analytic << ", numeric "
          << m.numeric;
    return out.str();
  }
};

// Which elements of an input of `size` to check: all of them, or a sorted random subset.
inline std::vector<size_t> gradient_check_points(size_t size, size_t max_points, Rng& rng) {
  std::vector<size_t> points;
  if (max_points == 0 || max_points >= size) {
    points.resize(size);
    for (size_t i = 0; i < size; ++i) points[i] = i;
    return points;
  }
  // Floyd's sampling: max_points distinct indices without materialising a permutation of
  // `size` (a whole network has millions of parameters).
  std::set<size_t> chosen;
  for (size_t j = size - max_points; j < size; ++j) {
    const size_t pick = static_cast<size_t>(rng.below(j + 1));
    chosen.insert(chosen.count(pick) ? j : pick);
  }
  return {chosen.begin(), chosen.end()};
}

inline GradientCheckReport check_gradients(const std::function<double()>& loss,
                                           const std::vector<GradientInput>& inputs,
                                           const GradientCheckOptions& options = {}) {
  GradientCheckReport report;
  Rng rng(options.seed);
  for (const GradientInput& input : inputs) {
    for (size_t index : gradient_check_points(input.size, options.max_points_per_input, rng)) {
      double& value = input.values[index];
      const double original = value;
      // Divide by the step actually taken: original +- step is rounded.
      const double up = original + options.step, down = original - options.step;
      value = up;
      const double loss_up = loss();
      value = down;
      const double loss_down = loss();
      value = original;
      const double numeric = (loss_up - loss_down) / (up - down);
      const double analytic = input.gradient[index];
      const double tolerance = options.atol + options.rtol * std::fabs(numeric);
      // Written so that a NaN on either side counts as a failure.
      const double ratio = std::fabs(analytic - numeric) / tolerance;
      ++report.checked;
      if (!(ratio <= 1.0)) {
        ++report.failed;
        if (report.mismatches.size() < options.max_reported)
          report.mismatches.push_back({input.name, index, analytic, numeric});
      }
      if (!(ratio <= report.worst_ratio)) report.worst_ratio = ratio;
    }
  }
  return report;
}

}  // namespace rddp::testing
