#include "resnet_ddp/crc32.h"

#include <zlib.h>

#include <cstdio>

#if defined(__x86_64__)
#include <immintrin.h>
#include <wmmintrin.h>
#endif

namespace rddp {

namespace {

uint32_t zlib_update(uint32_t crc, const void* data, size_t size) {
  // zlib takes a 32-bit length.
  constexpr size_t kChunk = size_t(1) << 30;
  uLong value = crc;
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    const size_t chunk = size < kChunk ? size : kChunk;
    value = ::crc32(value, bytes, static_cast<uInt>(chunk));
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(value);
}

#if defined(__x86_64__)

// The method of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction" (Gopal et al., 2009). Bytes in a 128-bit register are message bits in order,
// least significant first, so bit b stands for x^(127 - b) and the low 64-bit half holds the
// higher powers. A CRC depends on the message only modulo P, so a 128-bit block followed by
// D more bits may be replaced by (block * x^D) mod P, which carry-less multiplication of
// each 64-bit half by a 32-bit constant gives without a division: four blocks 64 bytes apart
// fold onto the next four, and at the end onto one another. What is left is a 16-byte
// message with the same residue as everything folded, which zlib finishes along with the
// bytes that did not fill a block. No Barrett reduction is needed, so no constant of it can
// be wrong.

// x^n mod P, reflected as zlib keeps its register: bit 31 is x^0.
constexpr uint32_t x_power_mod_p(unsigned n) {
  uint32_t r = 0x80000000u;
  for (unsigned i = 0; i < n; ++i) r = (r & 1u) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
  return r;
}

// The multiplier that moves a 64-bit half by `distance` bits. A reflected 64 x 33-bit
// carry-less product lands 32 places below where a 128-bit register wants it, so the power is
// 32 short, and one more shift puts x^0 at bit 32.
constexpr uint64_t fold_multiplier(unsigned distance) {
  return uint64_t(x_power_mod_p(distance - 32)) << 1;
}

// The high half (low 64 bits) stands 64 places further from the end than the low half.
constexpr unsigned kBlockBits = 128;
constexpr uint64_t kBy4High = fold_multiplier(4 * kBlockBits + 64);
constexpr uint64_t kBy4Low = fold_multiplier(4 * kBlockBits);
constexpr uint64_t kBy16High = fold_multiplier(16 * kBlockBits + 64);
constexpr uint64_t kBy16Low = fold_multiplier(16 * kBlockBits);
constexpr uint64_t kBy1High = fold_multiplier(kBlockBits + 64);
constexpr uint64_t kBy1Low = fold_multiplier(kBlockBits);

// The white paper's k1..k4 for this polynomial, as published: a check that the conventions
// above are the paper's.
static_assert(kBy4High == 0x154442bd4 && kBy4Low == 0x1c6e41596, "fold-by-4 constants");
static_assert(kBy1High == 0x1751997d0 && kBy1Low == 0x0ccaa009e, "fold-by-1 constants");

constexpr size_t kFoldMinimum = 64;
constexpr size_t kWideFoldMinimum = 256;

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i block, __m128i multipliers,
                                                             __m128i next) {
  const __m128i high = _mm_clmulepi64_si128(block, multipliers, 0x00);
  const __m128i low = _mm_clmulepi64_si128(block, multipliers, 0x11);
  return _mm_xor_si128(_mm_xor_si128(high, next), low);
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i load(const uint8_t* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

// Folds what is left in whole blocks onto the residue x, then has zlib read the residue and the
// last few bytes.
__attribute__((target("pclmul,sse4.1"))) uint32_t finish(__m128i x, const uint8_t* bytes,
                                                         size_t size) {
  const __m128i by1 = _mm_set_epi64x(static_cast<long long>(kBy1Low),
                                     static_cast<long long>(kBy1High));
  while (size >= 16) {
    x = fold(x, by1, load(bytes));
    bytes += 16;
    size -= 16;
  }
  // The residue as a message zlib reads from a zero register: zlib inverts on the way in.
  alignas(16) uint8_t residue[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(residue), x);
  const uint32_t folded = zlib_update(0xFFFFFFFFu, residue, sizeof(residue));
  return zlib_update(folded, bytes, size);
}

// size >= kFoldMinimum.
__attribute__((target("pclmul,sse4.1"))) uint32_t fold_then_zlib(uint32_t crc,
                                                                 const uint8_t* bytes,
                                                                 size_t size) {
  // zlib starts from the inverted CRC; XORed into the first 32 message bits it has the same
  // effect, and the folded residue then starts from zero.
  __m128i x0 = _mm_xor_si128(load(bytes), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = load(bytes + 16);
  __m128i x2 = load(bytes + 32);
  __m128i x3 = load(bytes + 48);
  bytes += 64;
  size -= 64;

  // Four independent chains keep the multiplier busy while each product is under way.
  const __m128i by4 = _mm_set_epi64x(static_cast<long long>(kBy4Low),
                                     static_cast<long long>(kBy4High));
  while (size >= 64) {
    x0 = fold(x0, by4, load(bytes));
    x1 = fold(x1, by4, load(bytes + 16));
    x2 = fold(x2, by4, load(bytes + 32));
    x3 = fold(x3, by4, load(bytes + 48));
    bytes += 64;
    size -= 64;
  }

  const __m128i by1 = _mm_set_epi64x(static_cast<long long>(kBy1Low),
                                     static_cast<long long>(kBy1High));
  __m128i x = fold(x0, by1, x1);
  x = fold(x, by1, x2);
  x = fold(x, by1, x3);
  return finish(x, bytes, size);
}

#define RDDP_CRC32_WIDE __attribute__((target("vpclmulqdq,avx512f,pclmul,sse4.1")))

RDDP_CRC32_WIDE inline __m512i fold512(__m512i blocks, __m512i multipliers, __m512i next) {
  const __m512i high = _mm512_clmulepi64_epi128(blocks, multipliers, 0x00);
  const __m512i low = _mm512_clmulepi64_epi128(blocks, multipliers, 0x11);
  return _mm512_ternarylogic_epi64(high, low, next, 0x96);  // high ^ low ^ next
}

RDDP_CRC32_WIDE inline __m512i multipliers512(uint64_t high, uint64_t low) {
  return _mm512_set_epi64(static_cast<long long>(low), static_cast<long long>(high),
                          static_cast<long long>(low), static_cast<long long>(high),
                          static_cast<long long>(low), static_cast<long long>(high),
                          static_cast<long long>(low), static_cast<long long>(high));
}

RDDP_CRC32_WIDE inline __m512i load512(const uint8_t* at) { return _mm512_loadu_si512(at); }

// The same with 512-bit registers, four blocks to an instruction: the 16 blocks of four
// registers fold onto the next 256 bytes, then the registers onto one another 64 bytes apart,
// and its four blocks onto one another. size >= kWideFoldMinimum.
RDDP_CRC32_WIDE uint32_t wide_fold_then_zlib(uint32_t crc, const uint8_t* bytes, size_t size) {
  __m512i z0 = _mm512_xor_si512(load512(bytes),
                                _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  __m512i z1 = load512(bytes + 64);
  __m512i z2 = load512(bytes + 128);
  __m512i z3 = load512(bytes + 192);
  bytes += 256;
  size -= 256;

  const __m512i by16 = multipliers512(kBy16High, kBy16Low);
  while (size >= 256) {
    z0 = fold512(z0, by16, load512(bytes));
    z1 = fold512(z1, by16, load512(bytes + 64));
    z2 = fold512(z2, by16, load512(bytes + 128));
    z3 = fold512(z3, by16, load512(bytes + 192));
    bytes += 256;
    size -= 256;
  }

  const __m512i by4 = multipliers512(kBy4High, kBy4Low);
  __m512i z = fold512(z0, by4, z1);
  z = fold512(z, by4, z2);
  z = fold512(z, by4, z3);

  // Through memory rather than lane extraction, whose intrinsics GCC 12 warns about at -O0.
  alignas(64) uint8_t blocks[64];
  _mm512_store_si512(blocks, z);
  const __m128i by1 = _mm_set_epi64x(static_cast<long long>(kBy1Low),
                                     static_cast<long long>(kBy1High));
  __m128i x = fold(load(blocks), by1, load(blocks + 16));
  x = fold(x, by1, load(blocks + 32));
  x = fold(x, by1, load(blocks + 48));
  return finish(x, bytes, size);
}

#endif  // __x86_64__

}  // namespace

namespace crc32_detail {

bool supported(Method method) {
  switch (method) {
    case Method::zlib:
      return true;
    case Method::pclmul:
#if defined(__x86_64__)
      __builtin_cpu_init();
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#else
      return false;
#endif
    case Method::vpclmul_avx512:
#if defined(__x86_64__)
      // The compilers' checks include the operating system's support for AVX-512 state.
      return supported(Method::pclmul) && __builtin_cpu_supports("vpclmulqdq") &&
             __builtin_cpu_supports("avx512f");
#else
      return false;
#endif
  }
  return false;
}

Method fastest() {
  static const Method method = supported(Method::vpclmul_avx512) ? Method::vpclmul_avx512
                               : supported(Method::pclmul)       ? Method::pclmul
                                                                 : Method::zlib;
  return method;
}

uint32_t update(Method method, uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  // Below a few blocks, the setup and zlib's finish cost more than folding saves.
  if (method == Method::vpclmul_avx512 && size >= kWideFoldMinimum)
    return wide_fold_then_zlib(crc, static_cast<const uint8_t*>(data), size);
  if (method != Method::zlib && size >= kFoldMinimum)
    return fold_then_zlib(crc, static_cast<const uint8_t*>(data), size);
#endif
  (void)method;
  return zlib_update(crc, data, size);
}

}  // namespace crc32_detail

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  return crc32_detail::update(crc32_detail::fastest(), crc, data, size);
}

std::string crc32_hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", crc);
  return text;
}

}  // namespace rddp
