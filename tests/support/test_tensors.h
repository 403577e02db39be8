#pragma once
// Small tools for tests over flat tensors: random fills from the portable Rng, NaN poison to
// prove that every output element is written, and elementwise comparison with a report.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/rng.h"

namespace rddp::testing {

template <typename T>
std::vector<T> random_uniform(Rng& rng, size_t size, double low = -1.0, double high = 1.0) {
  std::vector<T> values(size);
  for (T& value : values) value = static_cast<T>(rng.uniform(low, high));
  return values;
}

// Normally distributed values with standard deviation `scale`.
inline std::vector<float> normal_floats(Rng& rng, size_t count, double scale) {
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(scale * rng.normal());
  return values;
}

// An output buffer whose every element is NaN: any element a kernel forgets to write stays
// NaN and fails the comparison that follows.
template <typename T>
std::vector<T> nan_filled(size_t size) {
  return std::vector<T>(size, std::numeric_limits<T>::quiet_NaN());
}

template <typename To, typename From>
std::vector<To> converted(const std::vector<From>& values) {
  return std::vector<To>(values.begin(), values.end());
}

template <typename T>
size_t count_non_finite(const std::vector<T>& values) {
  size_t count = 0;
  for (const T& value : values) count += !std::isfinite(static_cast<double>(value));
  return count;
}

// The same bytes, NaN payloads and signed zeros included.
template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  // memcmp may not be given the null data() of empty vectors, even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The largest |value|: the scale that tolerances relative to a whole tensor start from.
template <typename T>
double max_abs(const T* values, size_t count) {
  double m = 0.0;
  for (size_t i = 0; i < count; ++i) m = std::max(m, std::fabs(static_cast<double>(values[i])));
  return m;
}

// Each element's allowed error: rel * (max |want| + |want[i]|). A long float sum is accurate
// relative to the magnitudes summed, not to its own result, so elements near zero are judged
// against the tensor's scale.
template <typename Ref>
std::vector<double> scaled_tolerance(const Ref* want, size_t count, double rel) {
  const double scale = max_abs(want, count);
  std::vector<double> tolerance(count);
  for (size_t i = 0; i < count; ++i)
    tolerance[i] = rel * (scale + std::fabs(static_cast<double>(want[i])));
  return tolerance;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) sum += a[i] * b[i];
  return sum;
}

struct CloseReport {
  size_t compared = 0, failed = 0;
  size_t first_index = 0;  // of the first failure
  double first_actual = 0.0, first_expected = 0.0;

  bool passed() const { return compared > 0 && failed == 0; }
  std::string summary() const {
    std::ostringstream out;
    out << failed << " of " << compared << " elements differ";
    if (failed)
      out << "; first at [" << first_index << "]: got " << first_actual << ", expected "
          << first_expected;
    if (compared == 0) out << "; nothing was compared (size mismatch or empty)";
    return out.str();
  }
};

// |actual - expected| <= atol + rtol * |expected| elementwise; NaN anywhere fails.
template <typename A, typename E>
CloseReport compare_close(const std::vector<A>& actual, const std::vector<E>& expected, double atol,
                          double rtol) {
  CloseReport report;
  if (actual.size() != expected.size()) return report;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    ++report.compared;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e))) {
      if (report.failed++ == 0) {
        report.first_index = i;
        report.first_actual = a;
        report.first_expected = e;
      }
    }
  }
  return report;
}

}  // namespace rddp::testing
