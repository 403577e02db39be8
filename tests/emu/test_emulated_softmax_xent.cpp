// kernels/softmax_xent.cu run on the CPU through the emulator (README.md), with the GPU test's
// checks (support/xent_kernel_check.h) at smaller sizes that still reach every path: a warp per
// row (up to 256 classes) and a block per row (257 and more), a partial last block of warps
// (batches of 1, 9 and 33 rows), rows that are not a multiple of the lanes, and the finishing
// kernel's strided sums over more rows than it has threads (batch 300).
#include <doctest/doctest.h>

#include "support/device_array.h"
#include "support/xent_kernel_check.h"

using namespace rddp::testing;

TEST_CASE("emulated softmax_cross_entropy matches its CPU twin") {
  Stream stream;
  xent_check::check_random_logits({1, 9, 33}, {2, 10, 33, 256, 257, 1001}, stream);
  xent_check::check_random_logits({300}, {7}, stream);
}

TEST_CASE("emulated softmax_cross_entropy: ties, huge logits, reproducible bits") {
  Stream stream;
  xent_check::check_ties_huge_and_bits(17, {10, 1000}, stream);
}

TEST_CASE("emulated softmax_cross_entropy flags labels outside [0, classes)") {
  Stream stream;
  xent_check::check_bad_labels(stream);
}
