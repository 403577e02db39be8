#include <algorithm>
#include <string>

#include "pack_format.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace fmt = pack_format;

namespace {

class Bytes {
 public:
  template <typename T>
  void put(T value) {
    text_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_raw(const void* data, size_t size) {
    text_.append(static_cast<const char*>(data), size);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Refuses, before anything is written, what the reader would refuse.
void check_info(const std::string& path, const PackInfo& info) {
  if (info.channels != 1 && info.channels != 3)
    fail("cannot write '", path, "': packs hold 1 or 3 channels, not ", info.channels);
  if (info.short_side < 1) fail("cannot write '", path, "': the packed size must be at least 1");
  if ((info.fixed_height == 0) != (info.fixed_width == 0) || info.fixed_height < 0 ||
      info.fixed_width < 0)
    fail("cannot write '", path, "': a fixed image size needs a height and a width");
  if (info.classes.empty() || info.classes.size() > fmt::kMaxClasses)
    fail("cannot write '", path, "': a pack holds 1 to ", fmt::kMaxClasses, " classes, not ",
         info.classes.size());
  for (const std::string& name : info.classes)
    if (name.empty() || name.size() > fmt::kMaxClassNameBytes)
      fail("cannot write '", path, "': class names must be 1 to ", fmt::kMaxClassNameBytes,
           " bytes long, got '", name, "'");
}

}  // namespace

PackWriter::PackWriter(const std::string& path, PackInfo info)
    : path_(path), info_((check_info(path, info), std::move(info))), out_(path) {
  Bytes header;
  header.put_raw(fmt::kMagic, sizeof fmt::kMagic);
  header.put(fmt::kVersion);
  header.put(uint32_t{0});  // flags
  header.put(info_.run_id);
  header.put(uint32_t(info_.channels));
  header.put(uint32_t(info_.short_side));
  header.put(uint32_t(info_.fixed_height));
  header.put(uint32_t(info_.fixed_width));
  header.put(uint32_t(info_.classes.size()));
  for (const std::string& name : info_.classes) {
    header.put(uint32_t(name.size()));
    header.put_raw(name.data(), name.size());
  }
  header.put(fmt::crc(header.text().data(), header.text().size()));
  out_.write(header.text().data(), header.text().size());
}

void PackWriter::add(const Image& image, int32_t label) {
  // The reader checks each of these; refusing here keeps a bad pack from being written at all.
  if (image.channels != info_.channels)
    fail("cannot write '", path_, "': an image of ", image.channels, " channels in a pack of ",
         info_.channels);
  if (std::min(image.height, image.width) != info_.short_side)
    fail("cannot write '", path_, "': a ", image.width, "x", image.height,
         " image in a pack whose images have a shorter side of ", info_.short_side);
  if (info_.fixed_height > 0 && (image.height != info_.fixed_height || image.width != info_.fixed_width))
    fail("cannot write '", path_, "': a ", image.width, "x", image.height, " image in a pack of ",
         info_.fixed_width, "x", info_.fixed_height, " images");
  if (int64_t(image.height) * image.width > kMaxImagePixels)
    fail("cannot write '", path_, "': a ", image.width, "x", image.height, " image has more than ",
         kMaxImagePixels, " pixels");
  if (label < 0 || size_t(label) >= info_.classes.size())
    fail("cannot write '", path_, "': label ", label, " is outside 0..", info_.classes.size() - 1);
  Entry entry{uint64_t(out_.size()), uint32_t(image.height), uint32_t(image.width), label,
              fmt::crc(image.pixels.data(), image.pixels.size())};
  out_.write(image.pixels.data(), image.pixels.size());
  index_.push_back(entry);
}

void PackWriter::finish() {
  if (index_.empty()) fail("cannot write '", path_, "': a pack needs at least one image");
  const uint64_t index_offset = out_.size();
  Bytes index;
  for (const Entry& entry : index_) {
    index.put(entry.offset);
    index.put(entry.height);
    index.put(entry.width);
    index.put(entry.label);
    index.put(entry.crc);
  }
  index.put(fmt::crc(index.text().data(), index.text().size()));
  out_.write(index.text().data(), index.text().size());

  Bytes trailer;
  trailer.put(index_offset);
  trailer.put(uint64_t(index_.size()));
  trailer.put(fmt::crc(trailer.text().data(), trailer.text().size()));
  trailer.put_raw(fmt::kEndMarker, sizeof fmt::kEndMarker);
  out_.write(trailer.text().data(), trailer.text().size());
  out_.commit();
}

}  // namespace rddp::data
