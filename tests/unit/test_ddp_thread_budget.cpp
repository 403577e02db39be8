// OpenMP threads per rank from the affinity masks of the ranks on a node.
#include <doctest/doctest.h>

#include <initializer_list>
#include <thread>
#include <vector>

#include "resnet_ddp/ddp/thread_budget.h"

using namespace rddp::ddp;

namespace {

CpuMask mask_of(std::initializer_list<int> cpus) {
  CpuMask mask(2, 0);  // CPUs 0..127
  for (int cpu : cpus) mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
  return mask;
}

}  // namespace

TEST_CASE("ranks that may all run on the same CPUs split them") {
  const CpuMask two = mask_of({0, 1});
  CHECK(openmp_thread_share({two, two}, 0) == 1);
  CHECK(openmp_thread_share({two, two}, 1) == 1);
  const CpuMask six = mask_of({0, 1, 2, 3, 4, 5});
  CHECK(openmp_thread_share({six, six, six}, 2) == 2);
  // 4 CPUs for 3 ranks: a third of a core is not a thread.
  const CpuMask four = mask_of({0, 1, 2, 3});
  CHECK(openmp_thread_share({four, four, four}, 0) == 1);
  // More ranks than CPUs: still one thread each.
  CHECK(openmp_thread_share({two, two, two}, 1) == 1);
}

TEST_CASE("ranks bound to their own CPUs keep them all") {
  CHECK(openmp_thread_share({mask_of({0}), mask_of({1})}, 0) == 1);
  CHECK(openmp_thread_share({mask_of({0, 1, 2, 3}), mask_of({4, 5, 6, 7})}, 1) == 4);
  // CPUs above 63 live in the second word.
  CHECK(openmp_thread_share({mask_of({64, 65, 100}), mask_of({0})}, 0) == 3);
  CHECK(openmp_thread_share({mask_of({0, 1, 2, 3, 4, 5, 6, 7})}, 0) == 8);
}

TEST_CASE("partly shared CPUs count by the share each rank has of them") {
  // Rank 0 may use CPUs 0-3, rank 1 only 0-1: rank 0 owns 2 and 3 and half of 0 and 1.
  const std::vector<CpuMask> masks = {mask_of({0, 1, 2, 3}), mask_of({0, 1})};
  CHECK(openmp_thread_share(masks, 0) == 3);
  CHECK(openmp_thread_share(masks, 1) == 1);
}

TEST_CASE("an unknown (empty) mask still gives one thread") {
  CHECK(openmp_thread_share({CpuMask(2, 0)}, 0) == 1);
  CHECK(count_cpus(CpuMask(2, 0)) == 0);
}

TEST_CASE("this process's affinity mask holds between 1 and all of the machine's CPUs") {
  const int cpus = count_cpus(current_affinity());
  CHECK(cpus >= 1);
  const unsigned online = std::thread::hardware_concurrency();
  if (online > 0) CHECK(cpus <= static_cast<int>(online));
}
