#pragma once
// CRC-32 as zlib computes it (reflected polynomial 0xEDB88320, pre- and post-inverted), which
// pack files and tensor files store. Packed images are checked on every read, so on x86-64
// CPUs with carry-less multiplication it runs several times faster than zlib's crc32; the
// value is the same either way.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rddp {

// zlib's crc32(crc, data, size) for any size: start from 0, and pass the result back in to
// continue over more bytes.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

// A CRC-32 as messages print it: 0x and 8 hexadecimal digits.
std::string crc32_hex(uint32_t crc);

// The ways crc32_update may take, so that tests check each one this CPU has.
namespace crc32_detail {

enum class Method {
  zlib,    // zlib's crc32, in pieces below its 32-bit length limit
  pclmul,  // folding with x86-64 PCLMULQDQ and SSE4.1; zlib below 64 bytes
  // Folding four blocks to an instruction with VPCLMULQDQ on AVX-512 registers (Intel Ice Lake
  // and AMD Zen 4 on); pclmul below 256 bytes.
  vpclmul_avx512,
};

bool supported(Method method);
// The fastest supported method, which crc32_update takes.
Method fastest();
// `method` must be supported.
uint32_t update(Method method, uint32_t crc, const void* data, size_t size);

}  // namespace crc32_detail

}  // namespace rddp
