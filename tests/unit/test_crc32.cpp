// crc32_update and each way it may take against zlib's crc32, whose values pack files and
// tensor files store.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/crc32.h"
#include "resnet_ddp/rng.h"

using namespace rddp;
using crc32_detail::Method;

namespace {

uint32_t zlib_crc(uint32_t crc, const uint8_t* data, size_t size) {
  return static_cast<uint32_t>(crc32(crc, data, static_cast<uInt>(size)));
}

std::vector<uint8_t> random_bytes(size_t size, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& byte : bytes) byte = static_cast<uint8_t>(rng.next_u64() >> 56);
  return bytes;
}

std::vector<Method> supported_methods() {
  std::vector<Method> methods;
  for (Method method : {Method::zlib, Method::pclmul, Method::vpclmul_avx512})
    if (crc32_detail::supported(method)) methods.push_back(method);
  return methods;
}

std::string name(Method method) {
  switch (method) {
    case Method::zlib:
      return "zlib";
    case Method::pclmul:
      return "pclmul";
    case Method::vpclmul_avx512:
      return "vpclmul_avx512";
  }
  return "?";
}

}  // namespace

TEST_CASE("crc32: the methods this CPU has, and which one crc32_update takes") {
  const auto methods = supported_methods();
  std::string names;
  for (Method method : methods) names += " " + name(method);
  MESSAGE("CRC-32 methods on this CPU:" << names << "; crc32_update takes "
                                        << name(crc32_detail::fastest()));
  CHECK(crc32_detail::supported(crc32_detail::fastest()));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
    CHECK(crc32_detail::fastest() != Method::zlib);
#endif
}

TEST_CASE("crc32: the standard check value and the empty message") {
  const std::string check = "123456789";
  CHECK(crc32_update(0, check.data(), check.size()) == 0xCBF43926u);
  CHECK(crc32_update(0, "", 0) == 0u);
  CHECK(crc32_update(0, nullptr, 0) == 0u);
  CHECK(crc32_update(0xDEADBEEFu, nullptr, 0) == 0xDEADBEEFu);
  for (Method method : supported_methods()) {
    CAPTURE(name(method));
    CHECK(crc32_detail::update(method, 0, check.data(), check.size()) == 0xCBF43926u);
    CHECK(crc32_detail::update(method, 0, "", 0) == 0u);
  }
}

TEST_CASE("crc32: every length to 4096 at every offset in a 16-byte block, as zlib") {
  const auto bytes = random_bytes(4096 + 16, 1);
  Rng rng(2);
  size_t compared = 0;
  for (size_t offset = 0; offset < 16; ++offset) {
    const uint8_t* data = bytes.data() + offset;
    for (size_t size = 0; size <= 4096; ++size) {
      // Starting values other than 0 stand for an earlier part of a message.
      const uint32_t start = (size % 3 == 0) ? 0u : static_cast<uint32_t>(rng.next_u64());
      const uint32_t expected = zlib_crc(start, data, size);
      const uint32_t got = crc32_update(start, data, size);
      if (got != expected) FAIL_CHECK("offset " << offset << ", " << size << " bytes");
      for (Method method : supported_methods())
        if (crc32_detail::update(method, start, data, size) != expected)
          FAIL_CHECK(name(method) << ": offset " << offset << ", " << size << " bytes");
      ++compared;
    }
  }
  CHECK(compared == 16 * 4097);
}

TEST_CASE("crc32: an image's 256 KiB and sizes around it, and 1 MiB, as zlib") {
  const size_t kImage = 256 * 1024;
  const auto bytes = random_bytes((1 << 20) + 64, 3);
  std::vector<size_t> sizes = {size_t(1) << 20, (size_t(1) << 20) + 63};
  for (size_t delta : {0, 1, 3, 15, 16, 17, 63, 64, 65, 127, 255})
    sizes.insert(sizes.end(), {kImage + delta, kImage - delta - 1});
  for (size_t offset : {0, 1, 8, 13}) {
    for (size_t size : sizes) {
      CAPTURE(offset);
      CAPTURE(size);
      const uint32_t expected = zlib_crc(0, bytes.data() + offset, size);
      CHECK(crc32_update(0, bytes.data() + offset, size) == expected);
      for (Method method : supported_methods())
        CHECK(crc32_detail::update(method, 0, bytes.data() + offset, size) == expected);
    }
  }
}

TEST_CASE("crc32: a message in pieces gives the CRC of the whole") {
  const auto bytes = random_bytes(300000, 4);
  const uint32_t whole = zlib_crc(0, bytes.data(), bytes.size());
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    // Pieces of every scale, empty ones included, so that cuts fall inside folding blocks.
    const uint64_t scale = uint64_t(1) << rng.below(18);
    for (Method method : supported_methods()) {
      CAPTURE(name(method));
      CAPTURE(trial);
      uint32_t crc = 0;
      size_t at = 0;
      Rng cuts(static_cast<uint64_t>(trial));
      while (at < bytes.size()) {
        const size_t piece = std::min<size_t>(cuts.below(2 * scale + 1), bytes.size() - at);
        crc = crc32_detail::update(method, crc, bytes.data() + at, piece);
        at += piece;
      }
      CHECK(crc == whole);
    }
    uint32_t crc = 0;
    size_t at = 0;
    Rng cuts(static_cast<uint64_t>(trial));
    while (at < bytes.size()) {
      const size_t piece = std::min<size_t>(cuts.below(2 * scale + 1), bytes.size() - at);
      crc = crc32_update(crc, bytes.data() + at, piece);
      at += piece;
    }
    CHECK(crc == whole);
  }
}

TEST_CASE("crc32: all-zero and all-one bytes, as zlib") {
  for (uint8_t fill : {uint8_t(0x00), uint8_t(0xFF)}) {
    const std::vector<uint8_t> bytes((1 << 20) + 100, fill);
    std::vector<size_t> sizes;
    for (size_t size = 0; size <= 1100; ++size) sizes.push_back(size);
    sizes.insert(sizes.end(), {65536, 256 * 1024, 256 * 1024 + 5, (1 << 20) + 100});
    for (uint32_t start : {0u, 0xFFFFFFFFu, 0x12345678u}) {
      for (size_t size : sizes) {
        const uint32_t expected = zlib_crc(start, bytes.data(), size);
        if (crc32_update(start, bytes.data(), size) != expected)
          FAIL_CHECK("fill " << int(fill) << ", start " << start << ", " << size << " bytes");
        for (Method method : supported_methods())
          if (crc32_detail::update(method, start, bytes.data(), size) != expected)
            FAIL_CHECK(name(method) << ": fill " << int(fill) << ", start " << start << ", "
                                    << size << " bytes");
      }
    }
  }
}

TEST_CASE("crc32: more than 4 GiB at once, past zlib's 32-bit length") {
  // Zero pages cost no memory: the kernel maps its shared zero page (a huge one where it can).
  const size_t size = (size_t(1) << 32) + 33;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    MESSAGE("skipped: cannot map 4 GiB of address space here");
    return;
  }
  madvise(mapped, size, MADV_HUGEPAGE);
  // The expected value without reading 4 GiB: zlib combines the CRCs of two halves.
  const std::vector<uint8_t> zeros(1 << 20, 0);
  uint32_t zeros_crc = zlib_crc(0, zeros.data(), zeros.size());
  for (z_off_t length = z_off_t(1) << 20; length < z_off_t(1) << 32; length *= 2)
    zeros_crc = static_cast<uint32_t>(crc32_combine(zeros_crc, zeros_crc, length));
  zeros_crc =
      static_cast<uint32_t>(crc32_combine(zeros_crc, zlib_crc(0, zeros.data(), 33), 33));
  const std::string prefix = "resnet_ddp";
  const uint32_t start =
      zlib_crc(0, reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size());
  const auto expected = static_cast<uint32_t>(crc32_combine(start, zeros_crc, z_off_t(size)));

  for (Method method : supported_methods()) {
    CAPTURE(name(method));
    CHECK(crc32_detail::update(method, start, mapped, size) == expected);
  }
  munmap(mapped, size);
}
