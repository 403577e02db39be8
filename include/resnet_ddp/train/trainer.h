#pragma once
// The training loop shared by every device and launch: data, engine, distributed hooks,
// schedule, validation, logs and weights. Returns the process exit code.
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/train/process_group.h"

namespace rddp {

int run_training(const TrainOptions& options, ProcessGroup& group);

}  // namespace rddp
