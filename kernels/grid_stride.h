#pragma once
// The grid of a grid-stride loop, for the host side of our kernels.
#include <cstdint>

namespace rddp::cuda {

// Blocks for `items` taken `per_block` a block: enough to cover them, but at most `max_blocks`
// (many waves on any current GPU; the loop does the rest), and at least 1, since a launch of no
// blocks is an invalid configuration.
inline unsigned grid_stride_blocks(int64_t items, int64_t per_block, int64_t max_blocks) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < max_blocks ? blocks : max_blocks));
}

}  // namespace rddp::cuda
