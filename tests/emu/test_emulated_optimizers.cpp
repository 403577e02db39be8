// kernels/optimizer_kernels.cu run on the CPU through the emulator (README.md), with the GPU
// test's checks (support/optimizer_kernel_check.h) at smaller sizes: 64 (vector loop only),
// 1001 (a tail after it; several blocks), 3 (the tail only) and offset 1 (every pointer
// misaligned: one element at a time). The grid-stride steps need more than 4096 * 256 * 4
// elements, too many for the emulator; the GPU test reaches them.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "support/device_array.h"
#include "support/optimizer_kernel_check.h"

using namespace rddp::testing;
using namespace rddp::testing::optimizer_check;

TEST_CASE("emulated AdamW kernel matches the CPU optimizer") {
  Stream stream;
  check_adamw({{64, 0}, {1001, 0}, {1001, 1}, {3, 0}}, 4099, stream);
}

TEST_CASE("emulated SGD kernel matches the CPU optimizer") {
  Stream stream;
  check_sgd({{1001, 0}, {1001, 1}, {64, 0}}, stream);
}

TEST_CASE("emulated optimizer kernels leave the masked parameters out of weight decay") {
  Stream stream;
  check_no_decay_mask(stream);
}

TEST_CASE("emulated optimizer kernels round every updated parameter into the 16-bit copy") {
  Stream stream;
  check_weight_copy<__nv_bfloat16>({{1001, 0}, {1001, 1}}, stream);
  check_weight_copy<__half>({{1001, 0}, {1001, 1}}, stream);
}
