#pragma once
// Loops over a tensor's elements in the tests' own checking code (layout copies, references,
// bounds, comparisons) run on every core from this size on. The GPU tests compare shapes of up
// to 8 million values a dozen times each per type and format, in double, and on one core that
// host-side checking, not the GPU, was most of their run time; below this size the threads would
// cost more than they save.
#include <cstddef>

namespace rddp::testing {

inline constexpr std::ptrdiff_t kParallelElements = std::ptrdiff_t{1} << 16;

}  // namespace rddp::testing
