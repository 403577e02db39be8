#pragma once
// How many OpenMP threads a rank may run. The CPU layers use OpenMP, whose threads spin while
// waiting; two ranks that each start one thread per core on the same cores fight for them and
// throughput collapses. So unless OMP_NUM_THREADS says otherwise, each core this rank may run
// on (its affinity mask) is shared among the ranks of the node that may run on it too.
#include <cstdint>
#include <string>
#include <vector>

namespace rddp::ddp {

// A set of CPU ids as a bitmask: bit c of word c / 64 is CPU c.
using CpuMask = std::vector<uint64_t>;

// This process's affinity mask (sched_getaffinity).
CpuMask current_affinity();
int count_cpus(const CpuMask& mask);

// Threads for the rank whose mask is masks[self] among the ranks of its node: the sum over
// its CPUs of 1 / (ranks whose masks hold that CPU), rounded down, at least 1. Disjoint masks
// (ranks bound to cores) keep their own CPUs; identical masks split them evenly.
int openmp_thread_share(const std::vector<CpuMask>& masks, int self);

}  // namespace rddp::ddp
