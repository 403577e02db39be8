#pragma once
// The learning rate at every step: optional linear warm-up, then constant, cosine or step
// decay, as torch.optim.lr_scheduler's LinearLR + CosineAnnealingLR / MultiStepLR do when
// stepped once per iteration (cosine) or per epoch (step).
#include <cstdint>
#include <vector>

#include "resnet_ddp/train/options.h"

namespace rddp {

class LrScheduleFn {
 public:
  LrScheduleFn(const TrainOptions& options, int64_t steps_per_epoch);
  // Learning rate of global step `step` (0-based, counted over all epochs).
  double at(int64_t step) const;
  int64_t total_steps() const { return total_steps_; }

 private:
  LrSchedule kind_;
  double base_lr_;
  int64_t steps_per_epoch_, warmup_steps_, total_steps_;
  std::vector<int> milestones_;
  double gamma_;
};

}  // namespace rddp
