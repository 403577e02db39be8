#pragma once
// The training loop's wait for its next batch, which a preemption ends even while a loader
// thread is stuck in a read (a hung mount).
#include <string>

#include "resnet_ddp/data/loader.h"

namespace rddp {

// What a rank says when preempted while its loader was stuck: the file, and that it exits with
// the preemption code without a checkpoint.
std::string preempted_while_stuck(const data::DataWaitInterrupted& stuck);

// loader.next(), given up on a preemption request: with several ranks the whole job ends with
// the preemption code (the others wait in a collective); one rank's run unwinds with
// DataWaitInterrupted to run_training, which returns the code.
data::Loader::Lease next_batch(data::Loader& loader, int world_size);

}  // namespace rddp
