// kernels/layout.cu run on the CPU through the emulator (README.md), with the GPU test's checks
// (support/layout_kernel_check.h) at shapes that reach every path of the weight copy: a slice
// in one chunk of the tile (the 7x7 stem, 1x1 and 3x3 weights), 512 and 1000 input channels in
// two and three chunks, and 65x65 taps that overflow the tile and gather instead.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

#include "support/layout_kernel_check.h"

using namespace rddp;

namespace {

const std::vector<testing::WeightShape> kShapes = {
    {64, 3, 7}, {16, 8, 3}, {32, 16, 1}, {5, 7, 3}, {4, 512, 3}, {3, 1000, 3}, {2, 3, 65}};

}  // namespace

TEST_CASE("emulated NCHW -> NHWC input conversion: float exact, 16-bit rounded like convert") {
  testing::check_input_to_nhwc<float>(3, 3, 7, 5, nullptr);
  testing::check_input_to_nhwc<__nv_bfloat16>(3, 3, 7, 5, nullptr);
  testing::check_input_to_nhwc<__half>(2, 1, 33, 17, nullptr);
}

TEST_CASE("emulated uint8 pixels -> normalised input: the loader's values, rounded like convert") {
  for (const MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
    testing::check_pixels_to_input<float>(3, 3, 7, 5, format, nullptr);
    testing::check_pixels_to_input<__nv_bfloat16>(2, 3, 9, 4, format, nullptr);
    testing::check_pixels_to_input<__half>(2, 1, 33, 17, format, nullptr);
  }
}

TEST_CASE("emulated conv weights go OIHW -> OHWI -> OIHW bit for bit, in one launch") {
  testing::check_weight_permutations<float>(kShapes, nullptr);
  testing::check_weight_permutations<__nv_bfloat16>(kShapes, nullptr);
  testing::check_weight_permutations<__half>(kShapes, nullptr);
}
