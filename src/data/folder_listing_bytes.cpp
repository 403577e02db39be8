// A folder listing as bytes: counts as 64-bit integers as the machine stores them, strings as a
// length and their bytes. Only ranks of one job read what another wrote, with the same build
// on the same kind of machine, so no byte order or version is recorded.
#include <cstring>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

class Writer {
 public:
  void number(uint64_t value) { bytes_.append(reinterpret_cast<const char*>(&value), sizeof value); }
  void text(const std::string& value) {
    number(value.size());
    bytes_ += value;
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  uint64_t number() {
    uint64_t value = 0;
    need(sizeof value);
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string text() {
    const uint64_t length = number();
    need(length);
    std::string value = bytes_.substr(at_, length);
    at_ += length;
    return value;
  }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  void need(uint64_t count) const {
    if (count > bytes_.size() - at_)
      fail("internal error: a folder listing received from rank 0 ends early");
  }
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_listing(const FolderListing& listing) {
  Writer out;
  out.number(listing.present ? 1 : 0);
  out.number(listing.classes.size());
  for (const std::string& name : listing.classes) out.text(name);
  out.number(listing.files.size());
  for (const LabelledFile& file : listing.files) {
    out.number(uint64_t(uint32_t(file.label)));
    out.text(file.path);
  }
  out.number(listing.skipped_links);
  out.text(listing.first_skipped_link);
  return out.take();
}

FolderListing decode_listing(const std::string& bytes) {
  Reader in(bytes);
  FolderListing listing;
  listing.present = in.number() != 0;
  const uint64_t classes = in.number();
  for (uint64_t i = 0; i < classes; ++i) listing.classes.push_back(in.text());
  const uint64_t files = in.number();
  for (uint64_t i = 0; i < files; ++i) {
    LabelledFile file;
    file.label = int32_t(uint32_t(in.number()));
    file.path = in.text();
    listing.files.push_back(std::move(file));
  }
  listing.skipped_links = in.number();
  listing.first_skipped_link = in.text();
  if (!in.at_end()) fail("internal error: a folder listing received from rank 0 has bytes to spare");
  return listing;
}

}  // namespace rddp::data
