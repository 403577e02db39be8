// OpenMP threads per rank from the ranks' affinity masks.
#include "resnet_ddp/ddp/thread_budget.h"

#include <sched.h>

#include <algorithm>
#include <bitset>
#include <cmath>

namespace rddp::ddp {

CpuMask current_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CpuMask mask((CPU_SETSIZE + 63) / 64, 0);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return mask;  // empty: unknown
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
  return mask;
}

int count_cpus(const CpuMask& mask) {
  int count = 0;
  for (uint64_t word : mask) count += static_cast<int>(std::bitset<64>(word).count());
  return count;
}

int openmp_thread_share(const std::vector<CpuMask>& masks, int self) {
  const CpuMask& mine = masks.at(static_cast<size_t>(self));
  double share = 0.0;
  for (size_t word = 0; word < mine.size(); ++word) {
    for (int bit = 0; bit < 64; ++bit) {
      const uint64_t cpu = uint64_t{1} << bit;
      if (!(mine[word] & cpu)) continue;
      int holders = 0;
      for (const CpuMask& other : masks) holders += word < other.size() && (other[word] & cpu);
      share += 1.0 / holders;
    }
  }
  // A small margin so that three ranks sharing three CPUs get one thread each despite rounding.
  return std::max(1, static_cast<int>(std::floor(share + 1e-9)));
}

}  // namespace rddp::ddp
