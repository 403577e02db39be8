// Metrics sums and agreement checks on host values.
#include "resnet_ddp/ddp/host_collectives.h"

#include <limits>

#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/error.h"

namespace rddp::ddp {

namespace {

void require_host_memory(const Comm& comm, const std::string& what) {
  if (comm.memory() != DeviceKind::cpu)
    fail("internal error: ", what, " needs a communicator on host memory, not ", comm.backend());
}

}  // namespace

Metrics reduce_metrics(Comm& host_comm, const Metrics& local, const std::string& what) {
  require_host_memory(host_comm, what);
  Metrics total = local;
  int64_t counts[3] = {local.correct, local.correct_top5, local.count};
  auto loss = host_comm.start_allreduce(&total.loss_sum, 1, DataType::f64, Reduction::sum, what);
  auto tallies = host_comm.start_allreduce(counts, 3, DataType::i64, Reduction::sum, what);
  loss->synchronize();
  tallies->synchronize();
  total.correct = counts[0];
  total.correct_top5 = counts[1];
  total.count = counts[2];
  return total;
}

void require_same(Comm& host_comm, int64_t value, const std::string& what) {
  require_host_memory(host_comm, what);
  int64_t low = value, high = value;
  auto min = host_comm.start_allreduce(&low, 1, DataType::i64, Reduction::min, "minimum of " + what);
  auto max = host_comm.start_allreduce(&high, 1, DataType::i64, Reduction::max, "maximum of " + what);
  min->synchronize();
  max->synchronize();
  if (low == high) return;
  throw AllRanksError("the ranks disagree on " + what + ": this rank has " + std::to_string(value) +
                      ", the ranks range from " + std::to_string(low) + " to " + std::to_string(high) +
                      ". Every rank must run the same number of collectives, or the ranks with more "
                      "wait forever for the others: give every rank the same data and settings "
                      "(the distributed sampler pads or drops so that each rank gets as many "
                      "batches as the others)");
}

RankDisagreement ranks_differing_from_rank0(Comm& host_comm, uint64_t value, const std::string& what) {
  require_host_memory(host_comm, what);
  uint64_t rank0 = value;
  host_comm.broadcast(&rank0, sizeof rank0, 0, "rank 0's " + what);
  const bool differs = value != rank0;
  int64_t count = differs ? 1 : 0;
  int64_t first = differs ? host_comm.rank() : std::numeric_limits<int64_t>::max();
  auto counted = host_comm.start_allreduce(&count, 1, DataType::i64, Reduction::sum, "count of ranks differing in " + what);
  auto lowest = host_comm.start_allreduce(&first, 1, DataType::i64, Reduction::min, "first rank differing in " + what);
  counted->synchronize();
  lowest->synchronize();
  return {count, count > 0 ? first : -1, rank0};
}

RankMaximum max_over_ranks(Comm& host_comm, double value, const std::string& what) {
  require_host_memory(host_comm, what);
  double largest = value;
  host_comm.allreduce(&largest, 1, DataType::f64, Reduction::max, what);
  int64_t first = value == largest ? host_comm.rank() : std::numeric_limits<int64_t>::max();
  host_comm.allreduce(&first, 1, DataType::i64, Reduction::min, "rank of the " + what);
  if (first == std::numeric_limits<int64_t>::max()) return {largest, -1};
  return {largest, first};
}

bool any_rank(Comm& host_comm, bool flag, const std::string& what) {
  require_host_memory(host_comm, what);
  int64_t value = flag ? 1 : 0;
  host_comm.allreduce(&value, 1, DataType::i64, Reduction::max, what);
  return value != 0;
}

std::string broadcast_from(Comm& host_comm, int root, std::string bytes, const std::string& what) {
  require_host_memory(host_comm, what);
  int64_t length = static_cast<int64_t>(bytes.size());
  host_comm.broadcast(&length, sizeof length, root, "length of " + what);
  bytes.resize(static_cast<size_t>(length));
  if (length > 0) host_comm.broadcast(bytes.data(), bytes.size(), root, what);
  return bytes;
}

}  // namespace rddp::ddp
