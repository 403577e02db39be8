#pragma once
// The parameters after one optimizer step of a GPU engine against the CPU engine's, when the two
// engines' gradients agree only within a tolerance. Both apply the same update to the same
// parameter, so their results differ by the update's sensitivity to the gradient times the
// gradient's tolerance g_tol, plus a few roundings of p and of the update in float32:
//   AdamW's first step moves p by lr * g / (|g| + eps): where |g| > g_tol both move the same
//   way and differ by at most lr * eps * g_tol / ((|g| + eps)(|g| - g_tol + eps)); where the
//   gradient is lost in the noise the direction may differ, by up to 2 lr.
//   SGD's first step moves p by lr * (g + wd p) (with momentum, nesterov doubles the
//   gradient's share: (1 + momentum)), so the difference is lr * (1 + momentum) * g_tol.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "resnet_ddp/engine.h"
#include "support/test_tensors.h"

namespace rddp::testing {

// The allowed difference of one parameter after the first step: its value before `p`, the CPU
// engine's gradient `g` and that gradient's tolerance `g_tol`.
inline double first_step_tolerance(const OptimizerConfig& o, double p, double g, double g_tol) {
  constexpr double kFloatRoundoff = 0x1p-24;
  p = std::fabs(p);
  g = std::fabs(g);
  const double sensitivity =
      o.kind == OptimizerKind::adamw
          ? (g > g_tol ? o.lr * o.eps * g_tol / ((g + o.eps) * (g - g_tol + o.eps)) : 2.0 * o.lr)
          : o.lr * (1.0 + o.momentum) * g_tol;
  return sensitivity + 8.0 * kFloatRoundoff * (p + o.lr * (1.0 + g + o.weight_decay * p));
}

// Every parameter tensor of `layout` after the step, `got` (the GPU engine's) against `want`
// (the CPU engine's); each gradient element's tolerance is grad_rel * (the tensor's largest
// |gradient| + its own), as scaled_tolerance gives it.
inline void check_first_step(const ParamLayout& layout, const OptimizerConfig& o,
                             const std::vector<float>& params_before,
                             const std::vector<float>& want_grads, double grad_rel,
                             const std::vector<float>& got, const std::vector<float>& want) {
  for (const TensorInfo& info : layout.tensors()) {
    if (info.role != TensorRole::parameter) continue;
    const float* g = want_grads.data() + info.offset;
    const std::vector<double> g_tol = scaled_tolerance(g, info.numel, grad_rel);
    size_t failed = 0;
    for (size_t i = 0; i < info.numel; ++i) {
      const size_t at = info.offset + i;
      const double tolerance = first_step_tolerance(o, params_before[at], g[i], g_tol[i]);
      if (std::fabs(static_cast<double>(got[at]) - want[at]) <= tolerance) continue;  // NaN fails
      if (failed++ < 3)
        FAIL_CHECK("stepped " << info.name << "[" << i << "] = " << got[at] << ", expected "
                              << want[at] << " within " << tolerance);
    }
    CHECK_MESSAGE(failed == 0,
                  "stepped " << info.name << ": " << failed << " of " << info.numel << " off");
  }
}

}  // namespace rddp::testing
