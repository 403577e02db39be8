#include "resnet_ddp/train/data_starvation.h"

#include <cstdio>

namespace rddp {

std::string data_starvation_warning(int64_t epoch, int rank, int world_size,
                                    const ddp::RankMaximum& most, int loader_workers) {
  if (most.rank != rank || !(most.value >= kStarvedDataWaitShare)) return "";
  char share[32];
  std::snprintf(share, sizeof share, "%.1f%%", 100.0 * most.value);
  std::string line = "epoch " + std::to_string(epoch + 1) + ": ";
  line += world_size > 1 ? "this rank waited for its data " + std::string(share) +
                               " of the time, the most of the " + std::to_string(world_size) +
                               " ranks, and every allreduce waited for it"
                         : "training waited for its data " + std::string(share) + " of the time";
  line += ": its " + std::to_string(loader_workers) +
          " loader thread(s) fall behind. More --num-workers (where the node has idle cores), a "
          "packed copy of the data set (resnet_ddp_pack; README, Data) or a less busy node or "
          "file system would help";
  return line;
}

}  // namespace rddp
