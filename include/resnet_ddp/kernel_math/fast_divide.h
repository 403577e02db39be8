#pragma once
// Division by a divisor fixed before a kernel runs, as one multiplication and a shift.
//
// A GPU has no integer divider: nvcc turns each 32-bit division by a value known only at run
// time into a sequence of about twenty instructions, conversions to and from float among them,
// and each 64-bit one into a call of about seventy. Index maths that splits a flat index into
// coordinates divides several times an element; in the kernels that gather the stem's max-pool
// gradient, that arithmetic, not memory, set their pace. Here the host finds, once, a
// multiplier m and a shift s for the divisor d, and q = (n * m) >> (31 + s) (or 63 + s) is
// floor(n / d) exactly (Granlund and Montgomery's method, rounding m up):
//   s = ceil(log2(d)), so 2^(s-1) < d <= 2^s, and m = ceil(2^(31+s) / d) = (2^(31+s) + e) / d
//   with 0 <= e < d, which is below 2^32. Then n * m / 2^(31+s) = n / d + n * e / (d * 2^(31+s))
//   and the second term is below n / 2^(31+s) <= 2^-s <= 1 / d for n < 2^31: too small to
//   carry n / d, whose fraction is at most (d - 1) / d, past the next integer. The same with 63
//   for 64-bit dividends below 2^63.
// tests/unit/test_fast_divide.cpp holds both against the / operator.
#include <stdint.h>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::hd {

struct FastDivisor {
  uint32_t divisor = 1;
  int shift = 0;                 // ceil(log2(divisor))
  uint32_t multiplier32 = 1u << 31;  // ceil(2^(31 + shift) / divisor)
  uint64_t multiplier64 = uint64_t{1} << 63;  // ceil(2^(63 + shift) / divisor)
};

// The divisor d >= 1 (the caller checks: a kernel cannot report a zero divisor).
inline FastDivisor make_fast_divisor(uint32_t d) {
  FastDivisor f;
  f.divisor = d;
  while ((uint64_t{1} << f.shift) < d) ++f.shift;
  const uint64_t low = uint64_t{1} << (31 + f.shift);
  f.multiplier32 = static_cast<uint32_t>((low + d - 1) / d);
  const unsigned __int128 high = static_cast<unsigned __int128>(1) << (63 + f.shift);
  f.multiplier64 = static_cast<uint64_t>((high + d - 1) / d);
  return f;
}

// floor(n / d) for n < 2^31.
RDDP_HD uint32_t divide(uint32_t n, const FastDivisor& d) {
  return static_cast<uint32_t>((static_cast<uint64_t>(n) * d.multiplier32) >> (31 + d.shift));
}

// floor(n / d) for n < 2^63.
RDDP_HD uint64_t divide(uint64_t n, const FastDivisor& d) {
  if (d.shift == 0) return n;  // d == 1, whose multiplier would need 64 + 1 bits of shift
#if defined(__CUDA_ARCH__)
  const uint64_t high = __umul64hi(n, d.multiplier64);
#else
  const auto high =
      static_cast<uint64_t>((static_cast<unsigned __int128>(n) * d.multiplier64) >> 64);
#endif
  return high >> (d.shift - 1);
}

// The quotient and remainder of n by d, for n < 2^31 or 2^63 by its type.
template <typename U>
struct QuotientRemainder {
  U quotient, remainder;
};
template <typename U>
RDDP_HD QuotientRemainder<U> divmod(U n, const FastDivisor& d) {
  const U q = divide(n, d);
  return {q, static_cast<U>(n - q * d.divisor)};
}

}  // namespace rddp::hd
