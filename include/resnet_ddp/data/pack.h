#pragma once
// Packed data sets: one file per split (train.rddp-pack, val.rddp-pack) holding the class
// names, the labels and every image as uint8 HWC pixels, already decoded and resized so that
// its shorter side is a chosen size (256 by default, torchvision's Resize(256)). Training
// memory-maps the file and copies each image out, so no JPEG is decoded while the GPU waits.
// resnet_ddp_pack writes them; docs/file_format.md describes every byte.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/atomic_file_writer.h"
#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

inline constexpr const char* kPackTrainFile = "train.rddp-pack";
inline constexpr const char* kPackValFile = "val.rddp-pack";
// The shorter side images are packed at unless told otherwise: what torchvision's ImageNet
// recipe resizes to before CenterCrop(224), so validation reads the packed pixels as they are.
inline constexpr int kDefaultPackSize = 256;

// What the header of a pack says about all of its images.
struct PackInfo {
  int channels = 3;
  int short_side = 0;    // every image's shorter side, as packed
  int fixed_height = 0;  // where the source has images of one size (Tiny-ImageNet): that size
  int fixed_width = 0;   // after packing; 0 where sizes differ (image folders)
  std::vector<std::string> classes;  // label k is classes[k]
  // Drawn once per resnet_ddp_pack run and written into each of its splits, so that training
  // can tell a validation pack from another run (open_packed). Read as 0 from version 1.
  uint64_t run_id = 0;
  int version = 0;  // of the file read; the writer writes the newest
};

// Writes one pack file, image by image, crash-safely (AtomicFileWriter): until finish() the
// target path is untouched, and a writer destroyed without finish() leaves nothing behind.
class PackWriter {
 public:
  PackWriter(const std::string& path, PackInfo info);
  // Images must have info.channels channels; labels must index info.classes.
  void add(const Image& image, int32_t label);
  void finish();
  size_t count() const { return index_.size(); }

 private:
  struct Entry {
    uint64_t offset;
    uint32_t height, width;
    int32_t label;
    uint32_t crc;
  };
  std::string path_;
  PackInfo info_;
  AtomicFileWriter out_;
  std::vector<Entry> index_;
};

// A pack file, memory-mapped. Opening checks the header, the index and the trailer with
// their CRCs; each image's own CRC is checked when the image is read, so that opening a pack
// of hundreds of gigabytes does not read it all. Every problem is an Error naming the file and
// saying to run resnet_ddp_pack again.
class PackedDataset final : public Dataset {
 public:
  // `name` starts the description, e.g. "packed train".
  PackedDataset(const std::string& path, const std::string& name);
  ~PackedDataset() override;
  PackedDataset(const PackedDataset&) = delete;
  PackedDataset& operator=(const PackedDataset&) = delete;

  size_t size() const override { return count_; }
  int num_classes() const override { return int(info_.classes.size()); }
  int channels() const override { return info_.channels; }
  int height() const override { return info_.fixed_height; }
  int width() const override { return info_.fixed_width; }
  Sample get(size_t index) const override;
  std::string source(size_t index) const override;
  std::string description() const override { return description_; }

  const PackInfo& info() const { return info_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, description_;
  PackInfo info_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* index_ = nullptr;  // count_ records of the file's index, in the mapping
  size_t count_ = 0;
};

// `dir` holds train.rddp-pack and, optionally, val.rddp-pack with the same classes, written by
// the same resnet_ddp_pack run (the run ids in their headers agree).
Splits open_packed(const std::string& dir);

// What resnet_ddp_pack does: reads an image folder or Tiny-ImageNet at `input`, decodes every
// image with `threads` threads, resizes its shorter side to `size` with the project's
// Pillow-exact resize, and writes output/train.rddp-pack (and val.rddp-pack where the input
// has a validation split). Both are written into a staging folder first and moved into place
// together, and a val.rddp-pack this run does not write is removed (pack_staging.h).
struct PackOptions {
  int size = 0;      // 0: kDefaultPackSize for image folders, 64 (as stored) for Tiny-ImageNet
  int threads = 1;
  int channels = 3;  // 3: RGB; 1: greyscale
  // Called now and then and at the end of each split with (split, done, total).
  std::function<void(const std::string&, size_t, size_t)> progress;
  // Called with a line for the user: each split's source, and what stopped runs left behind
  // in the output folder that this run removed.
  std::function<void(const std::string&)> note;
};
struct PackedSplit {
  std::string path;
  size_t images = 0;
  uint64_t bytes = 0;
};
std::vector<PackedSplit> pack_dataset(const std::string& input, const std::string& output,
                                      const PackOptions& options);

}  // namespace rddp::data
