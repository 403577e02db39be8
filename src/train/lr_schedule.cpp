#include "resnet_ddp/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace rddp {

LrScheduleFn::LrScheduleFn(const TrainOptions& options, int64_t steps_per_epoch)
    : kind_(options.lr_schedule),
      base_lr_(options.optimizer.lr),
      steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
      warmup_steps_(static_cast<int64_t>(std::llround(options.warmup_epochs * steps_per_epoch_))),
      total_steps_(static_cast<int64_t>(options.epochs) * steps_per_epoch_),
      milestones_(options.lr_step_epochs),
      gamma_(options.lr_gamma) {
  // --max-steps stops a run early; it does not reshape the schedule, so a run stopped and
  // resumed follows the same rates as one that ran straight through.
  warmup_steps_ = std::min(warmup_steps_, total_steps_);
}

double LrScheduleFn::at(int64_t step) const {
  // Warm-up ramps linearly so that the first step already moves (rate base/warmup), and the
  // rate reaches base at the end of warm-up.
  if (step < warmup_steps_) return base_lr_ * static_cast<double>(step + 1) / warmup_steps_;
  switch (kind_) {
    case LrSchedule::constant:
      return base_lr_;
    case LrSchedule::cosine: {
      const int64_t span = std::max<int64_t>(total_steps_ - warmup_steps_, 1);
      const double progress = std::min(1.0, static_cast<double>(step - warmup_steps_) / span);
      return base_lr_ * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
    case LrSchedule::step: {
      const int64_t epoch = step / steps_per_epoch_;
      const auto passed = std::count_if(milestones_.begin(), milestones_.end(),
                                        [&](int milestone) { return epoch >= milestone; });
      return base_lr_ * std::pow(gamma_, static_cast<double>(passed));
    }
  }
  return base_lr_;
}

}  // namespace rddp
