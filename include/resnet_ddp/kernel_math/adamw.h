#pragma once
// AdamW as torch.optim.AdamW (foreach=False, amsgrad=False), shared by the CUDA kernel in
// kernels/optimizer_kernels.cu and the CPU optimizer in src/optimizer.cpp.
//
// PyTorch computes the per-step scalars (bias corrections, step size, decay factor) as Python
// floats, in double, and rounds them to the tensor's type only when they meet a tensor; so do
// we, once per step: on the host, or under float16 loss scaling on the device, where the step
// count lives because only the device knows whether a step was skipped (kernels/loss_scaling.cu;
// the device's double pow may differ from the host's in the last bit, which rounding to float
// almost always hides). The per-element update then runs in Compute.
#include <cmath>
#include <cstdint>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::adamw {

template <typename Compute>
struct Scalars {
  Compute decay;                  // 1 - lr * weight_decay
  Compute beta1, one_minus_beta1;
  Compute beta2, one_minus_beta2;
  Compute step_size;              // lr / (1 - beta1^t)
  Compute bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  Compute eps;
};

// The step's settings, from the options and the learning-rate schedule.
struct Hyperparameters {
  double lr, weight_decay, beta1, beta2, eps;
};

// The scalars of step t (t counts from 1: the step being taken, after PyTorch's `step += 1`).
template <typename Compute>
RDDP_HD Scalars<Compute> scalars(double lr, double weight_decay, double beta1, double beta2,
                                 double eps, int64_t step) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - hd::pow_of(beta1, t);
  const double bias_correction2 = 1.0 - hd::pow_of(beta2, t);
  Scalars<Compute> s;
  s.decay = static_cast<Compute>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<Compute>(beta1);
  s.one_minus_beta1 = static_cast<Compute>(1.0 - beta1);
  s.beta2 = static_cast<Compute>(beta2);
  s.one_minus_beta2 = static_cast<Compute>(1.0 - beta2);
  s.step_size = static_cast<Compute>(lr / bias_correction1);
  s.bias_correction2_sqrt = static_cast<Compute>(hd::sqrt_of(bias_correction2));
  s.eps = static_cast<Compute>(eps);
  return s;
}

template <typename Compute>
RDDP_HD Scalars<Compute> scalars(const Hyperparameters& h, int64_t step) {
  return scalars<Compute>(h.lr, h.weight_decay, h.beta1, h.beta2, h.eps, step);
}

// One element, in PyTorch's order of operations:
//   p *= decay; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
//   p -= step_size * (m / (sqrt(v) / sqrt(bc2) + eps)).
// `decays` false is a param group of weight_decay 0, whose decay factor 1 - lr * 0 is exactly
// 1: p is left as it is, which multiplying by 1 would do too.
template <typename Compute, typename Param, typename Grad, typename State>
RDDP_HD void update(Param& param, const Grad& grad, State& exp_avg, State& exp_avg_sq,
                    const Scalars<Compute>& s, bool decays = true) {
  const Compute g = static_cast<Compute>(grad);
  // Rounded apart from the update, as torch.optim's p.mul_(1 - lr * wd), and the same arithmetic
  // with or without a mask: on a GPU, a product fused into the subtraction below where no mask
  // is given (the compiler splits the loop on it) but rounded where one is gave the decayed
  // parameters other bits under --no-decay-norm-bias (H100, 2026-11-28). A factor of 1 is exact.
  const Compute decayed =
      hd::mul_rounded(static_cast<Compute>(param), decays ? s.decay : static_cast<Compute>(1));
  const Compute m = s.beta1 * static_cast<Compute>(exp_avg) + s.one_minus_beta1 * g;
  const Compute v = s.beta2 * static_cast<Compute>(exp_avg_sq) + s.one_minus_beta2 * g * g;
  const Compute denom = hd::sqrt_of(v) / s.bias_correction2_sqrt + s.eps;
  param = static_cast<Param>(decayed - s.step_size * (m / denom));
  exp_avg = static_cast<State>(m);
  exp_avg_sq = static_cast<State>(v);
}

}  // namespace rddp::adamw
