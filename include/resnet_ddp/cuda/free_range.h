#pragma once
// Where scratch memory can go inside memory that is already allocated but not yet in use: the
// executor's timed convolution search runs before any step, when every activation buffer holds
// nothing worth keeping, so a convolution's search workspace can lie in the activations of the
// other layers instead of adding to the engine's peak. Plain host arithmetic on byte offsets,
// no CUDA, so that the CPU tests cover it.
#include <cstddef>
#include <vector>

namespace rddp::cuda {

// Bytes [begin, end).
struct ByteRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end > begin ? end - begin : 0; }
};

// The longest range of [0, total) that starts on a multiple of `align` and overlaps none of
// `used` (which may overlap each other, be empty, or reach past `total`). Among equally long
// ranges, the first. An empty range at 0 when there is none.
ByteRange largest_free_range(size_t total, std::vector<ByteRange> used, size_t align);

}  // namespace rddp::cuda
