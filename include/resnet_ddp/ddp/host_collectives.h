#pragma once
// Small collectives on host values that the training loop needs besides the gradients. Each
// takes a host-memory communicator (make_mpi_comm), so the watchdog covers them too.
#include <cstdint>
#include <string>
#include <utility>

#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/engine.h"

namespace rddp::ddp {

// The sums of every rank's metrics, on every rank (rank 0 reports them).
Metrics reduce_metrics(Comm& host_comm, const Metrics& local, const std::string& what = "metrics allreduce");

// Refuses ranks that disagree on `value`, e.g. the training steps per epoch: a rank that runs
// more steps than the others waits forever in an allreduce. Throws AllRanksError on every
// rank, naming this rank's value and the range over the ranks.
void require_same(Comm& host_comm, int64_t value, const std::string& what);

// How many ranks hold a value other than rank 0's, the lowest of them (-1 when none) and rank
// 0's value: the same answer on every rank, e.g. for a fingerprint of each rank's weights.
struct RankDisagreement {
  int64_t ranks = 0;
  int64_t first = -1;
  uint64_t rank0_value = 0;
};
RankDisagreement ranks_differing_from_rank0(Comm& host_comm, uint64_t value, const std::string& what);

// The largest `value` over the ranks and the lowest rank holding it (-1 if every value is NaN):
// the same answer on every rank, e.g. the rank that waited longest for its data.
struct RankMaximum {
  double value = 0.0;
  int64_t rank = -1;
};
RankMaximum max_over_ranks(Comm& host_comm, double value, const std::string& what);

// True on every rank when `flag` is true on any (e.g. one rank was told to stop).
bool any_rank(Comm& host_comm, bool flag, const std::string& what);

// Rank `root`'s `bytes` on every rank (other ranks' `bytes` are ignored): its length first,
// then the bytes, so that no other rank needs to know how many there are.
std::string broadcast_from(Comm& host_comm, int root, std::string bytes, const std::string& what);
inline std::string broadcast_from_rank0(Comm& host_comm, std::string bytes,
                                        const std::string& what) {
  return broadcast_from(host_comm, 0, std::move(bytes), what);
}

}  // namespace rddp::ddp
