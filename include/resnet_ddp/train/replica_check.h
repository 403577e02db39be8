#pragma once
// Data-parallel replicas must stay identical: every rank applies the same averaged gradients to
// the same weights with the same optimizer, so after every step each rank holds the same bits.
// Replicas that drift apart mean that a rank computed wrongly (a faulty GPU, its memory or its
// node: silent data corruption) or was started with other settings than the rest; training on
// would average the gradients of different models and report the curve of rank 0's alone.
#include <cstdint>
#include <string>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/train/process_group.h"

namespace rddp {

// CRC-32 of what must be equal on every rank, from the engine's saved state: the parameters, the
// optimizer's moments and its step count. Not BatchNorm's running statistics, which each rank
// updates from its own batch after taking rank 0's.
uint32_t replica_fingerprint(const ModelState<float>& model, const OptimizerState& optimizer);

// Compares this rank's fingerprint with rank 0's; when any rank differs, throws
// ddp::AllRanksError on every rank, naming how many differ, the first of them, and `when`
// ("after epoch 3 (global step 1200)").
void check_replicas_agree(const ModelState<float>& model, const OptimizerState& optimizer, ProcessGroup& group,
                          const std::string& when);

}  // namespace rddp
