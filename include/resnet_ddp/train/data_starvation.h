#pragma once
// An epoch's data wait across the ranks. Each allreduce waits for the slowest rank, so a rank
// whose loader falls behind (a busy node, a slow file system) slows the whole job while the
// other ranks show no data wait at all: that rank itself names the cause, with the fix.
#include <cstdint>
#include <string>

#include "resnet_ddp/ddp/host_collectives.h"

namespace rddp {

// A share of the epoch's time spent waiting for batches from which the GPU (or the CPU engine)
// is noticeably starved.
inline constexpr double kStarvedDataWaitShare = 0.10;

// The warning this rank prints at the end of epoch `epoch` (0-based), or "" for none: only the
// rank that waited the most (`most`, over every rank), and only from kStarvedDataWaitShare on.
std::string data_starvation_warning(int64_t epoch, int rank, int world_size,
                                    const ddp::RankMaximum& most, int loader_workers);

}  // namespace rddp
