#pragma once
// What the multi-rank test programs share: a narrow model that trains in milliseconds, random
// batches from per-rank seeds, and a check harness that works across ranks. Each failed check
// prints "[rank r/W host] FAILED: ..."; at the end the ranks agree whether any check failed on
// any rank, so that every rank exits non-zero and mpiexec reports the failure.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/mpi_check.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"
#include "support/engine_batches.h"

namespace rddp::mpi_test {

inline EngineConfig narrow_config() {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.in_channels = 3;
  config.spec.num_classes = 5;
  config.spec.widths = {4, 8, 8, 8};
  config.max_batch = 4;
  config.height = config.width = 16;
  config.optimizer.lr = 0.01;
  return config;
}

using testing::Batch;

// Rank `rank`'s batch of step `step`: any rank can make any other rank's batch.
inline Batch rank_batch(const EngineConfig& config, int rank, int64_t step) {
  return testing::random_batch(
      config, config.max_batch,
      derive_seed(2024, "rank " + std::to_string(rank) + " step " + std::to_string(step)));
}

class RankChecks {
 public:
  explicit RankChecks(const ddp::DistributedContext& context) : context_(context) {}

  bool check(bool ok, const std::string& what) {
    if (ok) {
      ++passed_;
      // Successes once, from rank 0, so the log shows what was verified without repeats.
      if (context_.rank() == 0) note("ok: " + what);
    } else {
      ++failed_;
      std::printf("%s FAILED: %s\n", context_.prefix().c_str(), what.c_str());
      std::fflush(stdout);
    }
    return ok;
  }

  // A line from this rank, or from rank 0 only.
  void note(const std::string& text) const {
    std::printf("%s %s\n", context_.prefix().c_str(), text.c_str());
    std::fflush(stdout);
  }
  void note_once(const std::string& text) const {
    if (context_.rank() == 0) note(text);
  }

  // Collective: 0 when every check passed on every rank.
  int finish() const {
    long long counts[2] = {passed_, failed_};
    RDDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG_LONG, MPI_SUM, context_.world()));
    note_once(std::to_string(counts[0]) + " checks passed and " + std::to_string(counts[1]) + " failed on " +
              std::to_string(context_.world_size()) + (context_.world_size() == 1 ? " rank" : " ranks"));
    return counts[1] == 0 ? 0 : 1;
  }

 private:
  const ddp::DistributedContext& context_;
  long long passed_ = 0, failed_ = 0;
};

// Every rank's copy of `values`, rank after rank.
template <typename T>
std::vector<T> allgather(const ddp::DistributedContext& context, const std::vector<T>& values) {
  std::vector<T> all(values.size() * static_cast<size_t>(context.world_size()));
  const int bytes = static_cast<int>(values.size() * sizeof(T));
  RDDP_MPI_CHECK(MPI_Allgather(values.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, context.world()));
  return all;
}

// Whether every rank holds exactly rank 0's bytes.
template <typename T>
bool same_on_every_rank(const ddp::DistributedContext& context, const std::vector<T>& values) {
  const std::vector<T> all = allgather(context, values);
  const size_t bytes = values.size() * sizeof(T);
  const auto* first = reinterpret_cast<const unsigned char*>(all.data());
  for (int r = 1; r < context.world_size(); ++r)
    if (!std::equal(first, first + bytes, first + r * bytes)) return false;
  return true;
}

}  // namespace rddp::mpi_test
