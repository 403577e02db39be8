#include "resnet_ddp/train/replica_check.h"

#include <vector>

#include "resnet_ddp/crc32.h"
#include "resnet_ddp/ddp/fatal.h"

namespace rddp {

namespace {

uint32_t crc_of(uint32_t crc, const std::vector<float>& values) {
  return crc32_update(crc, values.data(), values.size() * sizeof(float));
}

}  // namespace

uint32_t replica_fingerprint(const ModelState<float>& model, const OptimizerState& optimizer) {
  uint32_t crc = crc_of(0, model.params);
  crc = crc_of(crc, optimizer.first_moment);
  crc = crc_of(crc, optimizer.second_moment);
  return crc32_update(crc, &optimizer.step_count, sizeof optimizer.step_count);
}

void check_replicas_agree(const ModelState<float>& model, const OptimizerState& optimizer, ProcessGroup& group,
                          const std::string& when) {
  const uint32_t mine = replica_fingerprint(model, optimizer);
  const ddp::RankDisagreement differing =
      group.compare_with_rank0(mine, "fingerprint of the weights and optimizer state");
  if (differing.ranks == 0) return;
  throw ddp::AllRanksError(
      when + ", the weights and optimizer state of " + std::to_string(differing.ranks) + " of " +
      std::to_string(group.size()) + " ranks differ from rank 0's (the first: rank " + std::to_string(differing.first) +
      "; CRC-32 here " + crc32_hex(mine) + ", on rank 0 " + crc32_hex(static_cast<uint32_t>(differing.rank0_value)) +
      "). Data-parallel replicas must stay identical, so training stops here and checkpoints none of this. "
      "Either the ranks were started with different settings (every rank needs the same flags, e.g. --lr), or a "
      "rank computed wrongly: look for a faulty GPU or node (Xid or ECC errors in its kernel log, nvidia-smi -q) "
      "and continue from the last checkpoint with --resume on other nodes");
}

}  // namespace rddp
