// kernels/bf16_cast.cu run on the CPU through the emulator (README.md) against the host twins
// (src/ddp/bf16_gradients.cpp), bit for bit: the compression of --grad-allreduce bf16 over
// NaNs, infinities, subnormals, rounding ties and random bit patterns with several shares, and
// the widening of every bfloat16. Counts reach past kMaxBlocks * kThreads elements, where the
// grid-stride loops go round again. tests/unit/test_ddp_bf16_gradients.cpp holds the maths
// to an independent rounding; tests/gpu/test_cuda_bf16.cpp runs the kernels on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "resnet_ddp/cuda/bf16_cast.h"
#include "resnet_ddp/ddp/bf16_gradients.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/test_tensors.h"

using namespace rddp;
using namespace rddp::testing;

namespace {

// One round of the grid-stride loops: kMaxBlocks * kThreads of kernels/bf16_cast.cu.
constexpr size_t kOneRound = 8192 * 256;

float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The floats whose rounding has a rule of its own (tests/unit/test_ddp_bf16_gradients.cpp).
const uint32_t kSpecialBits[] = {
    0x00000000u, 0x80000000u, 0x3F800000u, 0xC0000000u,  // zeros, 1, -2
    0x7F800000u, 0xFF800000u,                            // infinities
    0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFF800001u,  // quiet and signalling NaNs,
    0x7FBF0000u, 0x7F80FFFFu,                            // payloads kept or only dropped
    0x00000001u, 0x80000001u, 0x00008000u, 0x00018000u,  // subnormals: the smallest, ties,
    0x007FFFFFu, 0x807FFFFFu, 0x00800000u,               // the largest, the smallest normal
    0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x3F808001u,  // ties to even, and either side
    0x3FFFFFFFu, 0xBFFFFFFFu,                            // a carry into the next binade
    0x7F7F0000u, 0x7F7F7FFFu, 0x7F7F8000u, 0x7F7FFFFFu,  // bfloat16's largest, and into Inf
    0xFF7FFFFFu,
};

// The special values first, then random bit patterns: every sign, exponent and mantissa.
std::vector<float> awkward_gradients(size_t count) {
  Rng rng(derive_seed(count, "bf16 gradients"));
  std::vector<float> values(count);
  const size_t specials = sizeof kSpecialBits / sizeof kSpecialBits[0];
  for (size_t i = 0; i < count; ++i)
    values[i] = float_of(i < specials ? kSpecialBits[i] : static_cast<uint32_t>(rng.next_u64()));
  return values;
}

// Elements after the `count` to convert, which must stay as they are. The emulator's guard
// bytes cannot show every write past the end: its 0xff poison read as a float compresses to
// the same 0xffff bits.
constexpr size_t kUntouched = 32;
constexpr uint16_t kUntouchedBits = 0x5555;

void check_compress(size_t count, float share) {
  CAPTURE(count);
  CAPTURE(share);
  const std::vector<float> gradients = awkward_gradients(count + kUntouched);
  const auto d_gradients = to_device(gradients, nullptr);
  std::vector<uint16_t> want(count + kUntouched, kUntouchedBits);
  // The first `count` poisoned (all bits set), as testing::poisoned.
  std::vector<uint16_t> out = want;
  std::fill_n(out.begin(), count, uint16_t{0xffff});
  const auto d_out = to_device(out, nullptr);
  cuda::compress_bf16(d_gradients.get(), d_out.get(), count, share, nullptr);
  ddp::compress_bf16(gradients.data(), want.data(), count, share);
  CHECK(bitwise_equal(to_host(d_out, nullptr), want));
}

void check_decompress(std::vector<uint16_t> in) {
  const size_t count = in.size();
  CAPTURE(count);
  in.resize(count + kUntouched, kUntouchedBits);
  const auto d_in = to_device(in, nullptr);
  std::vector<float> want(count + kUntouched, 1.0f);
  std::vector<float> out = want;
  std::fill_n(out.begin(), count, std::numeric_limits<float>::quiet_NaN());
  const auto d_out = to_device(out, nullptr);
  cuda::decompress_bf16(d_in.get(), d_out.get(), count, nullptr);
  ddp::decompress_bf16(in.data(), want.data(), count);
  CHECK(bitwise_equal(to_host(d_out, nullptr), want));
}

}  // namespace

TEST_CASE("emulated compress_bf16 matches the host twin bit for bit") {
  // 1/world_size for worlds of 1, 2, 3, 7 and 8 ranks: exact and inexact scalings.
  for (float share : {1.0f, 0.5f, 1.0f / 3.0f, 1.0f / 7.0f, 0.125f})
    for (size_t count : {size_t{1}, size_t{31}, size_t{255}, size_t{256}, size_t{257}, size_t{4099}})
      check_compress(count, share);
  // One full round, one element into the second, and a third round partly filled.
  for (size_t count : {kOneRound, kOneRound + 1, 2 * kOneRound + 333})
    check_compress(count, 1.0f / 3.0f);
}

TEST_CASE("emulated decompress_bf16 widens every bfloat16 as the host twin does") {
  std::vector<uint16_t> every(1u << 16);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  check_decompress(every);
  check_decompress({0x3F80});
  Rng rng(11);
  for (size_t count : {size_t{257}, kOneRound + 1, 2 * kOneRound + 333}) {
    std::vector<uint16_t> in(count);
    for (uint16_t& bits : in) bits = static_cast<uint16_t>(rng.next_u64());
    check_decompress(in);
  }
}

TEST_CASE("emulated bf16 casts of no elements launch nothing and touch nothing") {
  const auto d_gradients = to_device(std::vector<float>{1.0f}, nullptr);
  const auto d_bits = to_device(std::vector<uint16_t>{0x1234}, nullptr);
  cuda::compress_bf16(d_gradients.get(), d_bits.get(), 0, 0.5f, nullptr);
  cuda::decompress_bf16(d_bits.get(), d_gradients.get(), 0, nullptr);
  CHECK(to_host(d_bits, nullptr) == std::vector<uint16_t>{0x1234});
  CHECK(bitwise_equal(to_host(d_gradients, nullptr), std::vector<float>{1.0f}));
}
