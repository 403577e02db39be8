#include "resnet_ddp/train/batch_wait.h"

#include <string>

#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/train/preemption.h"

namespace rddp {

std::string preempted_while_stuck(const data::DataWaitInterrupted& stuck) {
  return "preempted (" + preemption_cause() + ") while waiting for data: " + stuck.what() +
         "; exiting with code " + std::to_string(kExitPreempted) +
         " without a checkpoint; --resume continues from the "
         "last one once the file system answers";
}

data::Loader::Lease next_batch(data::Loader& loader, int world_size) {
  try {
    return loader.next(preemption_requested);
  } catch (const data::DataWaitInterrupted& stuck) {
    if (world_size > 1) ddp::fatal_abort(preempted_while_stuck(stuck), kExitPreempted);
    throw;
  }
}

}  // namespace rddp
