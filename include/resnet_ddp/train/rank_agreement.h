#pragma once
// Agreements every rank reaches together before training: the same settings as rank 0's, and
// no rank that found a problem on its own. Each ends with ddp::AllRanksError thrown on every
// rank, so that the whole job stops with a message from each rank and a non-zero exit, instead
// of one rank leaving while the others wait for it.
#include <string>

#include "resnet_ddp/train/process_group.h"
#include "resnet_ddp/train/rank_settings.h"

namespace rddp {

// Compares every rank's `mine` with rank 0's. When any differs, every rank throws, naming the
// lowest rank that differs, its host, each setting that differs and its value on both ranks.
// `stage` says when ("at start", "once the data is open").
void require_rank0_settings(ProcessGroup& group, const RankSettings& mine,
                            const std::string& stage);

// When `problem` is not empty on any rank, every rank throws the lowest such rank's problem (on
// the other ranks prefixed with that rank and its host). `what` names the check for the
// watchdog.
void refuse_together(ProcessGroup& group, const std::string& problem, const std::string& what);

}  // namespace rddp
