#pragma once
// The two checks the 16-bit GPU tests make of each tensor against a float or double reference:
// every element within a share of (the tensor's largest |value| + its own |value|), and the
// relative L2 error of the whole tensor; plus a ledger of the worst of both over a test, which
// the tests print so that a run shows how close to its tolerances it came.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/param_layout.h"
#include "support/test_tensors.h"

namespace rddp::testing {

struct MixedTolerance {
  double element_rel;  // of (the tensor's largest |value| + the element's own |value|)
  double norm_rel;     // relative L2 error; infinity: not checked
};

class ErrorLedger {
 public:
  void note(const std::string& name, double relative, double element_ratio) {
    if (relative > worst_relative_) worst_relative_ = relative, relative_name_ = name;
    if (element_ratio > worst_element_) worst_element_ = element_ratio, element_name_ = name;
  }
  // In multiples of `unit` (the format's unit roundoff) and against the tolerance.
  std::string summary(double unit, const MixedTolerance& tolerance) const {
    std::ostringstream out;
    out << "worst relative L2 error " << worst_relative_ << " (" << worst_relative_ / unit
        << " u, allowed " << tolerance.norm_rel / unit << " u) in " << relative_name_
        << "; worst element error " << worst_element_ / unit << " u of (max + |value|) (allowed "
        << tolerance.element_rel / unit << " u) in " << element_name_;
    return out.str();
  }

 private:
  double worst_relative_ = 0.0, worst_element_ = 0.0;
  std::string relative_name_ = "-", element_name_ = "-";
};

// `got` divided by `divisor` (a loss scale, a power of two) against `want`; returns the relative
// L2 error. A NaN anywhere fails the element check.
template <typename Got, typename Ref>
double check_mixed_tensor(const std::string& name, const Got* got, const Ref* want, size_t count,
                          const MixedTolerance& tolerance, ErrorLedger* ledger = nullptr,
                          double divisor = 1.0) {
  const double scale = max_abs(want, count);
  size_t failed = 0;
  double error2 = 0.0, norm2 = 0.0, worst_ratio = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double g = static_cast<double>(got[i]) / divisor, w = static_cast<double>(want[i]);
    error2 += (g - w) * (g - w);
    norm2 += w * w;
    const double room = scale + std::fabs(w);
    if (room > 0.0 && std::fabs(g - w) / room > worst_ratio) worst_ratio = std::fabs(g - w) / room;
    const double allowed = tolerance.element_rel * room;
    if (std::fabs(g - w) <= allowed) continue;  // false for NaN
    if (failed++ < 3)
      FAIL_CHECK(name << "[" << i << "] = " << g << ", expected " << w << " within " << allowed);
  }
  CHECK_MESSAGE(failed == 0, name << ": " << failed << " of " << count << " off");
  // A tensor that is exactly zero (no signal) must come out exactly zero.
  const double relative = norm2 > 0.0 ? std::sqrt(error2 / norm2) : std::sqrt(error2);
  CHECK_MESSAGE(relative <= tolerance.norm_rel,
                name << ": relative L2 error " << relative << " > " << tolerance.norm_rel);
  if (ledger) ledger->note(name, relative, worst_ratio);
  return relative;
}

// check_mixed_tensor on every tensor of `role` in two flat buffers laid out by `layout`, each
// named "<what> <tensor name>".
template <typename Got, typename Ref>
void check_mixed_flat(const ParamLayout& layout, TensorRole role, const char* what,
                      const std::vector<Got>& got, const std::vector<Ref>& want,
                      const MixedTolerance& tolerance, ErrorLedger* ledger) {
  for (const TensorInfo& info : layout.tensors())
    if (info.role == role)
      check_mixed_tensor(std::string(what) + " " + info.name, got.data() + info.offset,
                         want.data() + info.offset, info.numel, tolerance, ledger);
}

}  // namespace rddp::testing
