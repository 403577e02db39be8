#pragma once
// SGD as torch.optim.SGD with dampening 0 (foreach=False, maximize=False), shared by the CUDA
// kernel in kernels/optimizer_kernels.cu and the CPU optimizer in src/optimizer.cpp.
#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::sgd {

template <typename Compute>
struct Scalars {
  Compute lr;
  Compute weight_decay;
  Compute momentum;  // 0: no momentum buffer is read or written
  bool nesterov;
};

template <typename Compute>
inline Scalars<Compute> scalars(double lr, double weight_decay, double momentum, bool nesterov) {
  return {static_cast<Compute>(lr), static_cast<Compute>(weight_decay),
          static_cast<Compute>(momentum), nesterov};
}

// One element: d = g + wd*p; buf = momentum*buf + d; d = nesterov ? d + momentum*buf : buf;
// p -= lr*d. `momentum_buffer` is untouched when momentum is 0. `decays` false is a param group
// of weight_decay 0.
//
// PyTorch has no buffer before the first step and then sets buf = d (a copy). Ours starts at
// zero instead, and momentum * 0 + d is exactly d in IEEE arithmetic (the product is an exact
// zero and adding zero rounds nothing; with FMA contraction too), so every later value is the
// same and no first-step flag is needed. The one difference is the sign of a zero: -0 + 0 is
// +0, which changes no value that is ever compared or printed.
template <typename Compute, typename Param, typename Grad, typename State>
RDDP_HD void update(Param& param, const Grad& grad, State& momentum_buffer,
                    const Scalars<Compute>& s, bool decays = true) {
  const Compute p = static_cast<Compute>(param);
  Compute d = static_cast<Compute>(grad);
  // PyTorch skips the term when weight_decay is 0, which matters for an infinite p.
  if (decays && s.weight_decay != Compute(0)) d += s.weight_decay * p;
  if (s.momentum != Compute(0)) {
    const Compute buf = s.momentum * static_cast<Compute>(momentum_buffer) + d;
    momentum_buffer = static_cast<State>(buf);
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  param = static_cast<Param>(p - s.lr * d);
}

}  // namespace rddp::sgd
