#pragma once
// The byte layout of a pack file (docs/file_format.md, "The packed data set file"), shared by
// its writer and its reader. Little-endian throughout, no padding.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "resnet_ddp/crc32.h"

namespace rddp::data::pack_format {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "pack files are little-endian; a big-endian host needs byte swapping here");

inline constexpr char kMagic[8] = {'R', 'D', 'D', 'P', 'P', 'A', 'C', 'K'};
inline constexpr char kEndMarker[8] = {'R', 'D', 'D', 'P', 'E', 'N', 'D', '\0'};
// 2 added run_id, after flags; version 1 packs are still read (their run id counts as 0).
inline constexpr uint32_t kVersion = 2;
// offset u64, height u32, width u32, label i32, pixel_crc u32.
inline constexpr size_t kIndexRecordBytes = 24;
// index_offset u64, image_count u64, trailer_crc u32, end marker.
inline constexpr size_t kTrailerBytes = 8 + 8 + 4 + 8;

// Limits no real data set comes near; they keep a corrupt field from meaning anything.
inline constexpr uint32_t kMaxClasses = 1u << 20;
inline constexpr uint32_t kMaxClassNameBytes = 4096;

// zlib's CRC-32, which readers check on every image.
inline uint32_t crc(const void* data, size_t size, uint32_t previous = 0) {
  return crc32_update(previous, data, size);
}

template <typename T>
T load(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace rddp::data::pack_format
