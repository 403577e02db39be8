#include "resnet_ddp/train/rank_agreement.h"

#include "resnet_ddp/ddp/fatal.h"

namespace rddp {

void require_rank0_settings(ProcessGroup& group, const RankSettings& mine,
                            const std::string& stage) {
  if (group.size() == 1) return;
  const std::string encoded = encode_settings(mine);
  const RankSettings rank0 =
      decode_settings(group.broadcast_from_rank0(encoded, "rank 0's settings " + stage));
  const bool differs = !setting_differences(rank0, mine).empty();
  const ddp::RankDisagreement differing =
      group.compare_with_rank0(differs ? 1 : 0, "settings " + stage);
  if (differing.ranks == 0) return;
  const int first = static_cast<int>(differing.first);
  const RankSettings theirs = decode_settings(
      group.broadcast_from(first, encoded, "the settings of rank " + std::to_string(first)));
  const std::string host =
      group.broadcast_from(first, group.host(), "the host of rank " + std::to_string(first));
  throw ddp::AllRanksError("rank " + std::to_string(first) + " (host " + host +
                           ") has settings other than rank 0's " + stage + ": " +
                           describe_differences(setting_differences(rank0, theirs),
                                                "on rank " + std::to_string(first), "on rank 0") +
                           (differing.ranks > 1
                                ? " (" + std::to_string(differing.ranks) + " of " +
                                      std::to_string(group.size()) +
                                      " ranks differ from rank 0; the first is named)"
                                : "") +
                           ". Every rank must train with the same settings and data, or the job "
                           "hangs, crashes or trains something other than what rank 0 reports: "
                           "start every rank with the same command line and the same data (an "
                           "MPMD launch 'A : B' gives each part its own flags; a job script that "
                           "builds the flags of each task must build them alike)");
}

void refuse_together(ProcessGroup& group, const std::string& problem, const std::string& what) {
  if (group.size() == 1) {
    if (!problem.empty()) throw ddp::AllRanksError(problem);
    return;
  }
  const ddp::RankMaximum found = group.max_over_ranks(problem.empty() ? 0.0 : 1.0, what);
  if (found.value == 0.0) return;
  const int first = static_cast<int>(found.rank);
  const std::string message = group.broadcast_from(first, problem, what + ": the problem found");
  const std::string host = group.broadcast_from(first, group.host(), what + ": the host");
  if (first == group.rank()) throw ddp::AllRanksError(message);
  throw ddp::AllRanksError("rank " + std::to_string(first) + " (host " + host +
                           ") refuses: " + message);
}

}  // namespace rddp
