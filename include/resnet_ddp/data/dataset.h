#pragma once
// Every data set is a random-access list of labelled uint8 images in HWC order, as
// torchvision's data sets are before ToTensor. The images of an image folder differ in size,
// so each decoded Image carries its own shape; the transforms (transform.h) bring every
// image to the size of a batch.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rddp::data {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes, HWC

  Image() = default;
  Image(int h, int w, int c) : height(h), width(w), channels(c), pixels(size_t(h) * w * c, 0) {}
  uint8_t* at(int y, int x) { return pixels.data() + (size_t(y) * width + x) * channels; }
  const uint8_t* at(int y, int x) const {
    return pixels.data() + (size_t(y) * width + x) * channels;
  }
};

struct Sample {
  Image image;
  int32_t label = 0;
};

// A region of an image. It may reach outside the image, where it reads zeros.
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
};

// Chooses a region of an image of the given size (inside it).
using ChooseCrop = std::function<CropBox(int height, int width)>;

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual size_t size() const = 0;
  virtual int num_classes() const = 0;
  virtual int channels() const = 0;
  // The size every image has, or 0 where images differ (image folders).
  virtual int height() const = 0;
  virtual int width() const = 0;

  // Safe to call from several threads at once. Bad data throws Error naming its source.
  virtual Sample get(size_t index) const = 0;
  // The sample with its image cropped to the region `choose` picks from the image's size: what
  // get(index) then cropping gives, which is what this does unless a data set can decode less
  // (an image folder decodes only the region of a JPEG).
  virtual Sample get_crop(size_t index, const ChooseCrop& choose) const;
  // Where a sample comes from, for messages: a file path, or a file and record number.
  virtual std::string source(size_t index) const = 0;
  // What the data set is, for the settings table: "CIFAR-10 train (/data/cifar, 50000)".
  virtual std::string description() const = 0;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// A data set's training split and, where it has one, its validation split (else null).
struct Splits {
  DatasetPtr train;
  DatasetPtr val;
};

}  // namespace rddp::data
