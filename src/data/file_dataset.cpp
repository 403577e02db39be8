#include <new>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

class FileDataset final : public Dataset {
 public:
  FileDataset(std::string description, std::vector<LabelledFile> files, int num_classes,
              int channels, int height, int width)
      : description_(std::move(description)),
        files_(std::move(files)),
        num_classes_(num_classes),
        channels_(channels),
        height_(height),
        width_(width) {}

  size_t size() const override { return files_.size(); }
  int num_classes() const override { return num_classes_; }
  int channels() const override { return channels_; }
  int height() const override { return height_; }
  int width() const override { return width_; }

  Sample get(size_t index) const override {
    RDDP_ASSERT(index < files_.size());
    const LabelledFile& file = files_[index];
    try {
      Sample sample{decode_image_file(file.path, channels_), file.label};
      check_size(file, sample.image.height, sample.image.width);
      return sample;
    } catch (const std::bad_alloc&) {
      fail_out_of_memory(file);
    }
  }

  // A JPEG decodes only the region chosen from its header's size.
  Sample get_crop(size_t index, const ChooseCrop& choose) const override {
    RDDP_ASSERT(index < files_.size());
    const LabelledFile& file = files_[index];
    try {
      const std::vector<uint8_t> bytes = read_image_file(file.path);
      const ChooseCrop checked = [&](int height, int width) {
        check_size(file, height, width);
        return choose(height, width);
      };
      return {decode_image_crop(bytes.data(), bytes.size(), channels_, checked,
                                printable(file.path)),
              file.label};
    } catch (const std::bad_alloc&) {
      fail_out_of_memory(file);
    }
  }

  std::string source(size_t index) const override { return printable(files_.at(index).path); }
  std::string description() const override { return description_; }

 private:
  [[noreturn]] static void fail_out_of_memory(const LabelledFile& file) {
    fail("not enough memory to read and decode ", printable(file.path),
         ": free memory, or read with fewer threads");
  }

  void check_size(const LabelledFile& file, int height, int width) const {
    if (height_ > 0 && (height != height_ || width != width_))
      fail("image ", printable(file.path), " is ", width, "x", height,
           " pixels, but every image of ", description_, " should be ", width_, "x", height_,
           ": replace the file, or read the folder as a plain image folder");
  }

  std::string description_;
  std::vector<LabelledFile> files_;
  int num_classes_, channels_, height_, width_;
};

}  // namespace

DatasetPtr make_file_dataset(std::string description, std::vector<LabelledFile> files,
                             int num_classes, int channels, int height, int width) {
  for (const LabelledFile& file : files)
    if (file.label < 0 || file.label >= num_classes)
      fail(printable(file.path), " has label ", file.label, ", out of range 0..", num_classes - 1);
  return std::make_shared<FileDataset>(std::move(description), std::move(files), num_classes,
                                       channels, height, width);
}

}  // namespace rddp::data
