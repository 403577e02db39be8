#include "resnet_ddp/data/worker_count.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "resnet_ddp/error.h"

namespace rddp::data {

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

WorkerCount resolve_worker_count(int requested, int ranks_on_node) {
  if (requested < 0) fail("the number of loader workers must not be negative (", requested, ")");
  if (requested > 0) return {requested, "as requested"};
  int cpus = 0;
  std::string source;
  const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
  if (slurm && std::atoi(slurm) > 0) {
    cpus = std::atoi(slurm);
    source = "SLURM_CPUS_PER_TASK=" + std::string(slurm);
  } else {
    cpus = affinity_cpu_count();
    source = std::to_string(cpus) + " CPUs in the affinity mask";
    const int machine = int(std::thread::hardware_concurrency());
    // A mask covering the whole machine means the launcher did not bind ranks to CPUs: the
    // ranks on this node share them.
    if (ranks_on_node > 1 && cpus == machine) {
      cpus = std::max(1, cpus / ranks_on_node);
      source += " shared by " + std::to_string(ranks_on_node) + " ranks";
    }
  }
  const int count = std::clamp(cpus - 1, 1, kMaxDefaultWorkers);
  if (count == cpus - 1) return {count, source + ", less one for training"};
  return {count, source + (count == 1 ? ", at least one" : ", at most " + std::to_string(count))};
}

}  // namespace rddp::data
