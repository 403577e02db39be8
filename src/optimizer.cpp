#include "resnet_ddp/optimizer.h"

#include <cmath>
#include <utility>

#include "resnet_ddp/kernel_math/adamw.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/kernel_math/sgd.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

namespace rddp {

const char* to_string(OptimizerKind kind) { return kind == OptimizerKind::adamw ? "adamw" : "sgd"; }

OptimizerKind parse_optimizer(const std::string& text) {
  if (text == "adamw") return OptimizerKind::adamw;
  if (text == "sgd") return OptimizerKind::sgd;
  fail("--optimizer: unknown optimizer '", text, "': use 'adamw' (torch.optim.AdamW) or 'sgd' ",
       "(torch.optim.SGD, with --momentum and --nesterov)");
}

void OptimizerConfig::validate() const {
  // Written as !(x > bound) so that NaN is refused too.
  if (!(lr > 0.0) || !std::isfinite(lr))
    fail("--lr must be a finite number > 0, got ", lr);
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    fail("--weight-decay must be a finite number >= 0, got ", weight_decay);
  if (!(beta1 >= 0.0 && beta1 < 1.0)) fail("--beta1 must be in [0, 1), got ", beta1);
  if (!(beta2 >= 0.0 && beta2 < 1.0)) fail("--beta2 must be in [0, 1), got ", beta2);
  if (!(eps > 0.0) || !std::isfinite(eps)) fail("--eps must be a finite number > 0, got ", eps);
  if (!(momentum >= 0.0) || !std::isfinite(momentum))
    fail("--momentum must be a finite number >= 0, got ", momentum);
  if (nesterov && momentum == 0.0)
    fail("--nesterov needs momentum: give --momentum a value > 0 (e.g. 0.9), or drop --nesterov");
}

template <typename T>
CpuOptimizer<T>::CpuOptimizer(const OptimizerConfig& config, size_t elements,
                              std::vector<uint32_t> no_decay_chunks)
    : config_(config), elements_(elements), no_decay_chunks_(std::move(no_decay_chunks)) {
  config_.validate();
  if (!no_decay_chunks_.empty() && no_decay_chunks_.size() != weight_decay::mask_words(elements))
    fail("internal error: a weight-decay mask of ", no_decay_chunks_.size(),
         " words for ", elements, " parameters; please report this");
  if (config_.kind == OptimizerKind::adamw) {
    first_moment_.assign(elements, T(0));
    second_moment_.assign(elements, T(0));
  } else if (config_.momentum != 0.0) {
    first_moment_.assign(elements, T(0));
  }
}

template <typename T>
void CpuOptimizer<T>::step(T* params, const T* grads, double lr) {
  // A schedule may reach 0 (the start of a warm-up), never below.
  if (!(lr >= 0.0) || !std::isfinite(lr))
    fail("optimizer step: the learning rate from the schedule must be finite and >= 0, got ", lr,
         "; check --lr and the schedule's settings");
  ++step_count_;
  const auto count = static_cast<std::ptrdiff_t>(elements_);
  const uint32_t* no_decay = no_decay_chunks_.empty() ? nullptr : no_decay_chunks_.data();
  if (config_.kind == OptimizerKind::adamw) {
    const auto s = adamw::scalars<T>(lr, config_.weight_decay, config_.beta1, config_.beta2,
                                     config_.eps, step_count_);
    T* exp_avg = first_moment_.data();
    T* exp_avg_sq = second_moment_.data();
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i)
      adamw::update(params[i], grads[i], exp_avg[i], exp_avg_sq[i], s,
                    weight_decay::applies(no_decay, static_cast<size_t>(i)));
  } else {
    const auto s = sgd::scalars<T>(lr, config_.weight_decay, config_.momentum, config_.nesterov);
    T* buffer = first_moment_.empty() ? nullptr : first_moment_.data();
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      T unused = T(0);
      sgd::update(params[i], grads[i], buffer != nullptr ? buffer[i] : unused, s,
                  weight_decay::applies(no_decay, static_cast<size_t>(i)));
    }
  }
}

template class CpuOptimizer<float>;
template class CpuOptimizer<double>;

}  // namespace rddp
