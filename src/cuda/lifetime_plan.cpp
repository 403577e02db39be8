#include "resnet_ddp/cuda/lifetime_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace {

size_t round_up(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

struct Placed {
  size_t begin = 0, end = 0;
  Lifetime life;
};

}  // namespace

LifetimePlan plan_lifetimes(const std::vector<BufferLife>& buffers, size_t align) {
  RDDP_ASSERT(align > 0);
  for (const BufferLife& b : buffers) RDDP_ASSERT(b.life.first <= b.life.last);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first: small buffers fill the gaps large ones leave, not the other way round. Ties
  // by the earlier start, then by index, so that the plan does not depend on the sort.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t bytes_a = round_up(buffers[a].bytes, align);
    const size_t bytes_b = round_up(buffers[b].bytes, align);
    if (bytes_a != bytes_b) return bytes_a > bytes_b;
    if (buffers[a].life.first != buffers[b].life.first)
      return buffers[a].life.first < buffers[b].life.first;
    return a < b;
  });

  LifetimePlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<Placed> placed;
  std::vector<Placed> neighbours;
  for (size_t index : order) {
    const size_t bytes = round_up(buffers[index].bytes, align);
    const Lifetime life = buffers[index].life;
    neighbours.clear();
    for (const Placed& p : placed)
      if (p.life.overlaps(life)) neighbours.push_back(p);
    std::sort(neighbours.begin(), neighbours.end(),
              [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
    // The smallest gap between neighbours that holds the buffer; else past the last of them.
    size_t best = 0, best_gap = 0, free_from = 0;
    bool found = false;
    for (const Placed& n : neighbours) {
      if (n.begin > free_from) {
        const size_t gap = n.begin - free_from;
        if (gap >= bytes && (!found || gap < best_gap)) {
          best = free_from;
          best_gap = gap;
          found = true;
        }
      }
      free_from = std::max(free_from, n.end);
    }
    if (!found) best = free_from;
    plan.offsets[index] = best;
    placed.push_back({best, best + bytes, life});
    plan.bytes = std::max(plan.bytes, best + bytes);
  }
  return plan;
}

size_t peak_in_use(const std::vector<BufferLife>& buffers, size_t align) {
  // Bytes that start being in use at an operation, and that stop after it.
  std::map<int, long long> change;
  for (const BufferLife& b : buffers) {
    const auto bytes = static_cast<long long>(round_up(b.bytes, align));
    change[b.life.first] += bytes;
    change[b.life.last + 1] -= bytes;
  }
  long long in_use = 0, peak = 0;
  for (const auto& [op, delta] : change) {
    in_use += delta;
    peak = std::max(peak, in_use);
  }
  return static_cast<size_t>(peak);
}

}  // namespace rddp::cuda
