#pragma once
// Dynamic loss scaling as torch.cuda.amp.GradScaler, for float16 mixed precision: the loss (in
// practice d(loss)/d(logits)) is multiplied by `scale` so that small gradients survive float16,
// the float gradients are multiplied back by 1/scale in the optimizer, and a step whose
// gradients hold an Inf or a NaN is skipped and lowers the scale. Written once for the device
// (the scale lives in device memory and is updated there, so the host never waits to learn
// whether a step was skipped) and the host (tests/unit/test_loss_scale.cpp).
//
// PyTorch's sources: torch/cuda/amp/grad_scaler.py (the defaults, and inv_scale computed as
// scale.double().reciprocal().float()) and aten/src/ATen/native/cuda/AmpKernels.cu
// (_amp_update_scale_, below, and _amp_foreach_non_finite_check_and_unscale_, which multiplies
// each gradient by inv_scale and raises found_inf on any non-finite one).
#include <cstdint>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::loss_scale {

// GradScaler's defaults.
struct Config {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;  // consecutive finite steps before the scale grows
};

struct State {
  float scale;
  int32_t growth_tracker;  // finite steps since the scale last changed
};

inline State initial(const Config& config) { return State{config.init_scale, 0}; }

// After a step: non-finite gradients halve the scale (backoff) and restart the count; otherwise
// the count grows, and at growth_interval the scale doubles, unless doubling overflows to Inf,
// in which case PyTorch keeps the scale as it is (and still restarts the count).
RDDP_HD void update(State& state, bool found_inf, const Config& config) {
  if (found_inf) {
    state.scale = state.scale * config.backoff_factor;
    state.growth_tracker = 0;
    return;
  }
  const int32_t successful = state.growth_tracker + 1;
  if (successful == config.growth_interval) {
    const float grown = state.scale * config.growth_factor;
    if (hd::is_finite(grown)) state.scale = grown;
    state.growth_tracker = 0;
  } else {
    state.growth_tracker = successful;
  }
}

// What the gradients are multiplied by: 1/scale in double, rounded once to float.
RDDP_HD float inverse(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

// One gradient element unscaled, in float, as PyTorch's unscale kernel does.
RDDP_HD float unscale(float grad, float inverse_scale) { return grad * inverse_scale; }

// Everything of the loss scaling that a step reads and writes, kept in device memory by the
// CUDA engine so that no step waits for the host: GradScaler's state, this step's verdict, and
// the optimizer's step count, which a skipped step must leave unchanged (AdamW's bias
// corrections depend on it, as PyTorch's skipped optimizer.step() leaves its `step` alone).
struct StepState {
  State scaler;           // as after the last step
  float inverse_scale;    // the step being taken: what its gradients are multiplied by
  int32_t found_inf;      // the step being taken: 1 when a gradient is Inf or NaN
  int64_t step_count;     // optimizer steps taken; skipped ones do not count
  int64_t skipped_steps;  // steps skipped since the host last read (and zeroed) this count
};

inline StepState initial_step_state(const Config& config, int64_t step_count) {
  return StepState{initial(config), 1.0f, 0, step_count, 0};
}

// Between the check of the gradients (found_inf set) and the optimizer: fixes the inverse
// scale the optimizer unscales with (the scale the loss was multiplied by), counts the step as
// taken or skipped, and then updates the scale for the next step, as GradScaler.step() followed
// by GradScaler.update() do. Returns whether the optimizer may update the parameters.
RDDP_HD bool begin_step(StepState& s, const Config& config) {
  s.inverse_scale = inverse(s.scaler.scale);
  const bool skip = s.found_inf != 0;
  if (skip)
    ++s.skipped_steps;
  else
    ++s.step_count;
  update(s.scaler, skip, config);
  return !skip;
}

}  // namespace rddp::loss_scale
