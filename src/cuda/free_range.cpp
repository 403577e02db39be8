#include "resnet_ddp/cuda/free_range.h"

#include <algorithm>

#include "resnet_ddp/error.h"

namespace rddp::cuda {

ByteRange largest_free_range(size_t total, std::vector<ByteRange> used, size_t align) {
  RDDP_ASSERT(align > 0);
  std::sort(used.begin(), used.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  ByteRange best{0, 0};
  // `free_from`: where the gap being looked at starts, the end of every used range so far.
  size_t free_from = 0;
  const auto consider = [&](size_t gap_end) {
    const size_t begin = (free_from + align - 1) / align * align;
    const ByteRange gap{begin, std::min(gap_end, total)};
    if (gap.size() > best.size()) best = gap;
  };
  for (const ByteRange& range : used) {
    if (range.size() == 0) continue;
    if (range.begin > free_from) consider(range.begin);
    free_from = std::max(free_from, range.end);
  }
  if (free_from < total) consider(total);
  return best;
}

}  // namespace rddp::cuda
