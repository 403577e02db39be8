#pragma once
// How many decoding threads a rank runs when the user does not say.
#include <string>

namespace rddp::data {

struct WorkerCount {
  int count = 1;
  std::string source;  // why this count, for the settings table
};

// `requested` > 0 wins. Otherwise the CPUs this rank may use, minus one for the training
// thread, at least 1 and at most kMaxDefaultWorkers: SLURM_CPUS_PER_TASK when Slurm set it,
// else the CPU affinity mask (sched_getaffinity), shared among `ranks_on_node` ranks when
// the mask is the whole machine (an unbound launch) rather than this rank's own CPUs.
WorkerCount resolve_worker_count(int requested, int ranks_on_node = 1);

// Beyond this, more decoding threads per rank only contend with other ranks' threads; a user
// who knows better sets the count.
constexpr int kMaxDefaultWorkers = 32;

// CPUs in this process's affinity mask (std::thread::hardware_concurrency() where the mask
// cannot be read).
int affinity_cpu_count();

}  // namespace rddp::data
