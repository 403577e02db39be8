// The bfloat16 maths of --grad-allreduce bf16 (include/resnet_ddp/kernel_math/bf16.h) and its host loops
// (dist/bf16_gradients.h), against a reference that rounds by comparing distances in double:
// a different algorithm from the bit trick under test. tests/parity/test_bf16_parity.py
// compares the same conversion with torch's bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "resnet_ddp/kernel_math/bf16.h"
#include "resnet_ddp/ddp/bf16_gradients.h"
#include "resnet_ddp/rng.h"

using namespace rddp;

namespace {

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The bfloat16 nearest to `value` (finite, and exactly representable in double), ties to
// the even one: the two bfloat16 neighbours by truncation, then the closer by distance.
uint16_t reference_round(double value) {
  const float truncated_float = static_cast<float>(value);  // may itself round; fixed below
  uint32_t bits;
  std::memcpy(&bits, &truncated_float, sizeof bits);
  uint16_t low = static_cast<uint16_t>(bits >> 16);
  // Step down (towards zero) until |low| <= |value|, then up is the other neighbour.
  while (std::fabs(static_cast<double>(bf16::to_float(low))) > std::fabs(value)) --low;
  uint16_t high = static_cast<uint16_t>(low + 1);
  while (std::fabs(static_cast<double>(bf16::to_float(high))) < std::fabs(value)) {
    low = high;
    ++high;
  }
  const double below = std::fabs(value - bf16::to_float(low));
  // high may be Inf (0x7F80 or 0xFF80): its distance is then that of bf16's max + 1 ulp,
  // 2^128, as IEEE rounding treats overflow.
  const double high_value = (high & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), value)
                                                        : static_cast<double>(bf16::to_float(high));
  const double above = std::fabs(high_value - value);
  if (below < above) return low;
  if (above < below) return high;
  return (low & 1) == 0 ? low : high;
}

bool is_quiet_nan(uint16_t bits) { return (bits & 0x7F80) == 0x7F80 && (bits & 0x0040) != 0; }

}  // namespace

TEST_CASE("float to bfloat16 rounds to nearest, ties to even, at the edges of the format") {
  CHECK(bf16::from_float(1.0f) == 0x3F80);
  CHECK(bf16::from_float(-2.0f) == 0xC000);
  CHECK(bf16::from_float(0.0f) == 0x0000);
  CHECK(bf16::from_float(-0.0f) == 0x8000);
  // Halfway between 0x3F80 and 0x3F81: to the even one; between 0x3F81 and 0x3F82 likewise.
  CHECK(bf16::from_float(from_bits(0x3F808000u)) == 0x3F80);
  CHECK(bf16::from_float(from_bits(0x3F818000u)) == 0x3F82);
  CHECK(bf16::from_float(from_bits(0x3F808001u)) == 0x3F81);
  CHECK(bf16::from_float(from_bits(0x3F807FFFu)) == 0x3F80);
  // A carry out of the mantissa moves to the next binade.
  CHECK(bf16::from_float(from_bits(0x3FFFFFFFu)) == 0x4000);
  // Subnormals round the same way, and the largest subnormal rounds up to the smallest normal.
  CHECK(bf16::from_float(from_bits(0x00008000u)) == 0x0000);
  CHECK(bf16::from_float(from_bits(0x00018000u)) == 0x0002);
  CHECK(bf16::from_float(from_bits(0x807FFFFFu)) == 0x8080);
  // bfloat16's largest finite value stays; anything from halfway to the next power is Inf.
  CHECK(bf16::from_float(from_bits(0x7F7F0000u)) == 0x7F7F);
  CHECK(bf16::from_float(from_bits(0x7F7F7FFFu)) == 0x7F7F);
  CHECK(bf16::from_float(from_bits(0x7F7F8000u)) == 0x7F80);
  CHECK(bf16::from_float(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(bf16::from_float(-std::numeric_limits<float>::max()) == 0xFF80);
  CHECK(bf16::from_float(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(bf16::from_float(-std::numeric_limits<float>::infinity()) == 0xFF80);
  // NaNs stay NaN and quiet, with their sign, even when the payload is only in the dropped bits.
  CHECK(is_quiet_nan(bf16::from_float(std::numeric_limits<float>::quiet_NaN())));
  CHECK(is_quiet_nan(bf16::from_float(from_bits(0x7F800001u))));
  CHECK(is_quiet_nan(bf16::from_float(from_bits(0xFF800001u))));
  CHECK((bf16::from_float(from_bits(0xFF800001u)) & 0x8000) != 0);
  CHECK(std::isnan(bf16::to_float(bf16::from_float(from_bits(0x7FBFFFFFu)))));
}

TEST_CASE("every bfloat16 widens exactly and rounds back to itself") {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto value = static_cast<uint16_t>(bits);
    if ((value & 0x7F80) == 0x7F80 && (value & 0x007F) != 0) continue;  // NaN: checked above
    const float wide = bf16::to_float(value);
    uint32_t wide_bits;
    std::memcpy(&wide_bits, &wide, sizeof wide_bits);
    REQUIRE(wide_bits == bits << 16);
    REQUIRE(bf16::from_float(wide) == value);
  }
}

TEST_CASE("rounding agrees with a distance-comparing reference on random and halfway floats") {
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng.below(uint64_t{1} << 32));
    if (i % 4 == 1) bits = (bits & 0xFFFF0000u) | 0x8000u;  // exactly halfway
    if (i % 4 == 2) bits &= 0x807FFFFFu;                    // subnormal
    const float value = from_bits(bits);
    if (!std::isfinite(value)) continue;
    CAPTURE(bits);
    REQUIRE(bf16::from_float(value) == reference_round(value));
  }
}

TEST_CASE("compress, accumulate and decompress over buffers") {
  Rng rng(11);
  const size_t n = 4099;
  std::vector<float> gradients(n);
  for (float& g : gradients) g = static_cast<float>(rng.normal() * std::exp(rng.normal() * 8));

  SUBCASE("compress rounds, scales and rounds again, as bf16_compress_hook") {
    for (float share : {1.0f, 0.5f, 0.25f, 1.0f / 3.0f, 1.0f / 7.0f}) {
      CAPTURE(share);
      std::vector<uint16_t> out(n, 0xAAAA);
      ddp::compress_bf16(gradients.data(), out.data(), n, share);
      for (size_t i = 0; i < n; ++i) {
        const double once = bf16::to_float(reference_round(gradients[i]));
        // The product of two floats is exact in double, so the reference rounds it only once.
        REQUIRE(out[i] == reference_round(once * static_cast<double>(share)));
      }
      // A power-of-two share only moves the exponent: one rounding in all.
      if (share == 0.5f || share == 0.25f)
        for (size_t i = 0; i < n; ++i)
          REQUIRE(bf16::to_float(out[i]) == bf16::to_float(bf16::from_float(gradients[i])) * share);
    }
  }
  SUBCASE("accumulate adds in float and rounds each sum to bfloat16") {
    std::vector<uint16_t> a(n), b(n);
    ddp::compress_bf16(gradients.data(), a.data(), n, 1.0f);
    for (size_t i = 0; i < n; ++i) b[i] = bf16::from_float(static_cast<float>(rng.normal()));
    std::vector<uint16_t> sum = b;
    ddp::accumulate_bf16(a.data(), sum.data(), n);
    for (size_t i = 0; i < n; ++i) {
      // Two bfloat16 values sum exactly in double unless their exponents are far apart, in
      // which case the smaller is far below half an ulp of the larger either way.
      const double exact = static_cast<double>(bf16::to_float(a[i])) + bf16::to_float(b[i]);
      REQUIRE(sum[i] == reference_round(exact));
    }
    std::vector<uint16_t> other_order = a;
    ddp::accumulate_bf16(b.data(), other_order.data(), n);
    CHECK(other_order == sum);  // commutative, as the MPI operation declares
  }
  SUBCASE("decompress widens exactly") {
    std::vector<uint16_t> bits(n);
    ddp::compress_bf16(gradients.data(), bits.data(), n, 1.0f);
    std::vector<float> back(n, -1.0f);
    ddp::decompress_bf16(bits.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) REQUIRE(bf16::from_float(back[i]) == bits[i]);
    // 8 significant bits (7 stored): half an ulp is at most 2^-8 of the value.
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(std::fabs(back[i] - gradients[i]) <= std::ldexp(std::fabs(gradients[i]), -8));
      worst = std::max(worst, std::fabs(static_cast<double>(back[i]) - gradients[i]) / std::fabs(gradients[i]));
    }
    // ...and that bound is reached, so 2^-9 would be too tight.
    CHECK(worst > std::ldexp(1.0, -9));
  }
}
