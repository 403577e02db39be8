// Reading a pack file through a memory mapping: nothing is read at open but the header, the
// index and the trailer; the kernel pages images in as the loader asks for them.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "pack_format.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/mapped_file_fault.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace fmt = pack_format;

namespace {

constexpr const char* kFix = ": make the pack again with resnet_ddp_pack";

// What a file that is no pack may be instead.
std::string foreign_advice(const uint8_t* head, size_t size) {
  auto starts_with = [&](const char* prefix, size_t length) {
    return size >= length && std::memcmp(head, prefix, length) == 0;
  };
  if (starts_with("RDDPTNSR", 8))
    return "it is a resnet_ddp weights or checkpoint file, not a packed data set";
  if (starts_with("version https://git-lfs", 23))
    return "it is a Git LFS pointer, not the file itself: run `git lfs pull`";
  if (starts_with("\x1f\x8b", 2)) return "it is gzip-compressed: decompress it first";
  return "it does not start with the pack magic 'RDDPPACK'";
}

// Reads the header front to back, each field checked against the bytes that are left.
class HeaderCursor {
 public:
  HeaderCursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  template <typename T>
  T take(const char* what) {
    need(sizeof(T), what);
    const T value = fmt::load<T>(data_ + position_);
    position_ += sizeof(T);
    return value;
  }
  std::string take_text(size_t length, const char* what) {
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + position_), length);
    position_ += length;
    return text;
  }
  size_t position() const { return position_; }

 private:
  void need(size_t bytes, const char* what) {
    if (bytes > size_ - position_)
      fail("'", path_, "' is truncated: it ends inside the header (", what, ")", kFix);
  }
  const uint8_t* data_;
  size_t size_, position_ = 0;
  const std::string& path_;
};

}  // namespace

PackedDataset::PackedDataset(const std::string& path, const std::string& name) : path_(path) {
  if (!path_exists(path)) fail("cannot open '", path, "': ", std::strerror(ENOENT), kFix);
  const RegularFile file(path);  // no FIFO or device: opening one could block
  map_size_ = size_t(file.size());
  if (map_size_ == 0) fail("'", path, "' is empty", kFix);
  void* map = ::mmap(nullptr, map_size_, PROT_READ, MAP_SHARED, file.fd(), 0);
  const int map_errno = errno;  // the mapping keeps the file open once it is closed
  if (map == MAP_FAILED) fail("cannot map '", path, "' into memory: ", std::strerror(map_errno));
  map_ = static_cast<const uint8_t*>(map);
  report_bus_errors_for(path);
  try {
    // The magic and the version first: a later version may lay out everything else otherwise.
    if (map_size_ < 8 && std::memcmp(map_, fmt::kMagic, map_size_) == 0)
      fail("'", path, "' is truncated: it ends inside the magic", kFix);
    if (map_size_ < 8 || std::memcmp(map_, fmt::kMagic, 8) != 0)
      fail("'", path, "' is not a resnet_ddp pack: ", foreign_advice(map_, map_size_),
           "; packs are made by resnet_ddp_pack");
    HeaderCursor header(map_, map_size_, path);
    header.take_text(8, "magic");
    const uint32_t version = header.take<uint32_t>("version");
    if (version == 0 || version > fmt::kVersion)
      fail("'", path, "' is a pack of format version ", version, "; this resnet_ddp reads version ",
           fmt::kVersion, version > fmt::kVersion ? ": use a newer resnet_ddp, or" : std::string(),
           kFix);
    const uint32_t flags = header.take<uint32_t>("flags");
    info_.version = int(version);
    if (version >= 2) info_.run_id = header.take<uint64_t>("run id");
    info_.channels = int(header.take<uint32_t>("channels"));
    const uint32_t short_side = header.take<uint32_t>("short_side");
    const uint32_t fixed_height = header.take<uint32_t>("fixed_height");
    const uint32_t fixed_width = header.take<uint32_t>("fixed_width");
    const uint32_t class_count = header.take<uint32_t>("class_count");
    // A huge count runs out of file quickly: nothing is sized from it up front.
    for (uint32_t k = 0; k < class_count; ++k) {
      const uint32_t length = header.take<uint32_t>("class name length");
      if (length == 0 || length > fmt::kMaxClassNameBytes)
        fail("'", path, "' is damaged: class ", k, " has a name of ", length, " bytes", kFix);
      info_.classes.push_back(header.take_text(length, "class name"));
    }
    const size_t header_end = header.position();
    const uint32_t header_crc = header.take<uint32_t>("header CRC");
    if (fmt::crc(map_, header_end) != header_crc)
      fail("'", path, "' is damaged: the header's CRC does not match", kFix);
    // Checked after the CRC, so that a damaged field is reported as damage.
    if (flags != 0)
      fail("'", path, "' uses optional features (flags ", flags, ") this resnet_ddp does not "
           "know: use a newer resnet_ddp, or", kFix);
    if (info_.channels != 1 && info_.channels != 3)
      fail("'", path, "' says its images have ", info_.channels, " channels, not 1 or 3", kFix);
    if (short_side == 0 || short_side > uint32_t(kMaxImagePixels))
      fail("'", path, "' says its images have a shorter side of ", short_side, kFix);
    if ((fixed_height == 0) != (fixed_width == 0) ||
        (fixed_height != 0 && std::min(fixed_height, fixed_width) != short_side))
      fail("'", path, "' has an invalid fixed image size ", fixed_width, "x", fixed_height, kFix);
    if (class_count == 0 || class_count > fmt::kMaxClasses)
      fail("'", path, "' lists ", class_count, " classes", kFix);
    info_.short_side = int(short_side);
    info_.fixed_height = int(fixed_height);
    info_.fixed_width = int(fixed_width);
    const size_t pixels_begin = header.position();

    // The trailer, found from the end: without the end marker the file was cut or never
    // finished.
    if (map_size_ - pixels_begin < fmt::kTrailerBytes ||
        std::memcmp(map_ + map_size_ - 8, fmt::kEndMarker, 8) != 0)
      fail("'", path, "' is truncated: it does not end with the end marker (was resnet_ddp_pack "
           "stopped, or the copy cut short?)", kFix);
    const uint8_t* trailer = map_ + map_size_ - fmt::kTrailerBytes;
    const uint64_t index_offset = fmt::load<uint64_t>(trailer);
    const uint64_t count = fmt::load<uint64_t>(trailer + 8);
    if (fmt::crc(trailer, 16) != fmt::load<uint32_t>(trailer + 16))
      fail("'", path, "' is damaged: the trailer's CRC does not match", kFix);
    const size_t index_space = map_size_ - fmt::kTrailerBytes;  // where the index must end
    if (count == 0 || count > (index_space - 4) / fmt::kIndexRecordBytes ||
        index_offset < pixels_begin ||
        index_offset != index_space - 4 - count * fmt::kIndexRecordBytes)
      fail("'", path, "' is damaged: its trailer places ", count, " index records at byte ",
           index_offset, " of a ", map_size_, "-byte file", kFix);
    count_ = size_t(count);
    index_ = map_ + index_offset;
    const size_t index_bytes = count_ * fmt::kIndexRecordBytes;
    if (fmt::crc(index_, index_bytes) != fmt::load<uint32_t>(index_ + index_bytes))
      fail("'", path, "' is damaged: the index's CRC does not match", kFix);

    // Images lie back to back from the end of the header to the index, so every record's
    // bytes are inside the file and no two overlap.
    uint64_t expected = pixels_begin;
    for (size_t i = 0; i < count_; ++i) {
      const uint8_t* record = index_ + i * fmt::kIndexRecordBytes;
      const uint64_t offset = fmt::load<uint64_t>(record);
      const uint32_t height = fmt::load<uint32_t>(record + 8);
      const uint32_t width = fmt::load<uint32_t>(record + 12);
      const int32_t label = fmt::load<int32_t>(record + 16);
      if (offset != expected || height == 0 || width == 0 ||
          uint64_t(height) * width > uint64_t(kMaxImagePixels) ||
          std::min(height, width) != short_side ||
          (fixed_height != 0 && (height != fixed_height || width != fixed_width)) || label < 0 ||
          uint32_t(label) >= class_count)
        fail("'", path, "' is damaged: index record ", i, " (", width, "x", height, " at byte ",
             offset, ", label ", label, ") does not fit the file", kFix);
      expected += uint64_t(height) * width * uint64_t(info_.channels);
      if (expected > index_offset)
        fail("'", path, "' is damaged: image ", i, " runs past the start of the index", kFix);
    }
    if (expected != index_offset)
      fail("'", path, "' is damaged: ", index_offset - expected,
           " bytes lie between the last image and the index", kFix);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), map_size_);
    stop_reporting_bus_errors_for(path);
    throw;
  }
  description_ = name + " (" + path + ", " + std::to_string(count_) + " images, " +
                 std::to_string(info_.classes.size()) + " classes, shorter side " +
                 std::to_string(info_.short_side) + ")";
}

PackedDataset::~PackedDataset() {
  ::munmap(const_cast<uint8_t*>(map_), map_size_);
  stop_reporting_bus_errors_for(path_);
}

Sample PackedDataset::get(size_t index) const {
  RDDP_ASSERT(index < count_);
  const uint8_t* record = index_ + index * fmt::kIndexRecordBytes;
  const uint64_t offset = fmt::load<uint64_t>(record);
  Sample sample;
  sample.image = Image(int(fmt::load<uint32_t>(record + 8)), int(fmt::load<uint32_t>(record + 12)),
                       info_.channels);
  sample.label = fmt::load<int32_t>(record + 16);
  std::memcpy(sample.image.pixels.data(), map_ + offset, sample.image.pixels.size());
  // The copy, not the mapping, is checked: the file could change between a check and a copy.
  if (fmt::crc(sample.image.pixels.data(), sample.image.pixels.size()) !=
      fmt::load<uint32_t>(record + 20))
    fail("'", path_, "' is damaged: image ", index, " does not match its CRC (the file changed "
         "after it was written, or the disk returned bad data)", kFix);
  return sample;
}

std::string PackedDataset::source(size_t index) const {
  return path_ + " image " + std::to_string(index);
}

}  // namespace rddp::data
