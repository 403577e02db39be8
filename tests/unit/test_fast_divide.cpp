// include/resnet_ddp/kernel_math/fast_divide.h against the / operator: every divisor up to 4096 and the large ones
// (powers of two and their neighbours, primes, the largest), each with the dividends where a
// multiplier rounded wrongly would fail first (just below and at every multiple near the top of
// the range, the range's ends) and a spread of random ones, in both widths.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "resnet_ddp/kernel_math/fast_divide.h"

using namespace rddp::hd;

namespace {

std::vector<uint32_t> divisors() {
  std::vector<uint32_t> out;
  for (uint32_t d = 1; d <= 4096; ++d) out.push_back(d);
  for (int bit = 12; bit <= 31; ++bit) {
    const uint32_t p = uint32_t{1} << bit;
    out.insert(out.end(), {p - 1, p, p + 1});
  }
  // Primes, ResNet's plane and tensor sizes, and the largest divisor a 32-bit dividend allows.
  out.insert(out.end(), {65521u, 1000003u, 2147483629u, 112u * 112u, 64u * 112u * 112u,
                         256u * 64u * 112u * 112u / 8u, 2147483647u});
  return out;
}

// The number of dividends of d checked; the first wrong quotient or remainder fails the test.
template <typename U>
size_t check_dividends(uint32_t d, U top, std::mt19937_64& random) {
  const FastDivisor f = make_fast_divisor(d);
  std::vector<U> dividends = {0, 1, static_cast<U>(d - 1), d, static_cast<U>(top - 1)};
  // Around the last multiples of d below the top, where the error term is largest.
  const U last = static_cast<U>((top - 1) / d * d);
  for (U k = 0; k < 3 && last >= k * d + 1; ++k)
    dividends.insert(dividends.end(), {static_cast<U>(last - k * d), static_cast<U>(last - k * d - 1)});
  for (int i = 0; i < 64; ++i) dividends.push_back(static_cast<U>(random() % top));
  for (const U n : dividends) {
    const QuotientRemainder<U> qr = divmod(n, f);
    if (divide(n, f) != n / d || qr.quotient != n / d || qr.remainder != n % d) {
      CAPTURE(d);
      CAPTURE(n);
      CHECK(divide(n, f) == n / d);
      CHECK(qr.remainder == n % d);
      return 0;
    }
  }
  return dividends.size();
}

}  // namespace

TEST_CASE("fast division is exact for every 32-bit dividend below 2^31") {
  std::mt19937_64 random(7);
  size_t checked = 0;
  for (const uint32_t d : divisors()) checked += check_dividends<uint32_t>(d, uint32_t{1} << 31, random);
  CHECK(checked > 4096 * 70);
  // Exhaustively for a few divisors ResNet's stem divides by, over a range of dividends.
  for (const uint32_t d : {2u, 3u, 7u, 56u, 64u, 112u, 12544u}) {
    const FastDivisor f = make_fast_divisor(d);
    uint32_t wrong = 0;
    for (uint32_t n = 0; n < (1u << 22); ++n) wrong += divide(n, f) != n / d;
    CAPTURE(d);
    CHECK(wrong == 0);
  }
}

TEST_CASE("fast division is exact for every 64-bit dividend below 2^63") {
  std::mt19937_64 random(11);
  size_t checked = 0;
  for (const uint32_t d : divisors()) checked += check_dividends<uint64_t>(d, uint64_t{1} << 63, random);
  CHECK(checked > 4096 * 70);
}

TEST_CASE("a multiplier rounded down instead of up is caught") {
  // The checks above mean something only if they fail a wrong multiplier: one less than the
  // rounded-up one gives a wrong quotient near the top of the range for some small divisor.
  bool caught = false;
  for (uint32_t d = 3; d < 64 && !caught; ++d) {
    FastDivisor f = make_fast_divisor(d);
    if ((uint64_t{1} << (31 + f.shift)) % d == 0) continue;  // d a power of two: exact either way
    f.multiplier32 -= 1;
    for (uint32_t n = (1u << 31) - 1; n > (1u << 31) - 4096 && !caught; --n)
      caught = divide(n, f) != n / d;
  }
  CHECK(caught);
}
