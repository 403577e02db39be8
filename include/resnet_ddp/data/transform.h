#pragma once
// What happens to each image on its way into a batch, as torchvision's transforms do it on PIL
// images: RandomCrop with zero padding, RandomResizedCrop, Resize + CenterCrop, and
// RandomHorizontalFlip. The geometry and the pixel arithmetic are torchvision's; the random
// numbers are our own (rddp::Rng), drawn per sample from (seed, epoch, sample index), so a
// batch does not depend on how many threads made it.
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/rng.h"

namespace rddp::data {

// What the user asks for; data_config.cpp turns it into a Transform for the data set.
enum class AugmentMode {
  automatic,          // crop_flip for fixed-size data sets, resized_crop_flip for image folders
  none,               // training images prepared as evaluation images are
  crop_flip,          // RandomCrop(size, padding=4) + RandomHorizontalFlip(0.5)
  resized_crop_flip,  // RandomResizedCrop(size) + RandomHorizontalFlip(0.5)
};
const char* to_string(AugmentMode mode);
AugmentMode parse_augment_mode(const std::string& text);  // throws Error listing the choices

struct Transform {
  enum class Kind {
    center,                    // Resize(resize) when resize > 0, then CenterCrop(size)
    random_crop_flip,          // RandomCrop(size, padding) + RandomHorizontalFlip(flip_probability)
    random_resized_crop_flip,  // RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip
  };
  Kind kind = Kind::center;
  int size = 32;    // every output image is size x size
  int resize = 0;   // center: the shorter side is resized to this first; 0 leaves the image
  int padding = 4;  // random_crop_flip: zeros added on every side before cropping
  double scale_min = 0.08, scale_max = 1.0;          // random_resized_crop_flip: area fraction
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // and aspect ratio (width / height)
  double flip_probability = 0.5;

  void validate() const;  // throws Error on sizes or ranges no image can be made with
};

// In torchvision's words, for the settings table: "RandomCrop(32, padding=4) + RandomHo...".
std::string to_string(const Transform& transform);

// The shorter side torchvision's ImageNet recipe resizes to before CenterCrop(size):
// 256 for 224, the same 256/224 ratio for other sizes (rounded down).
int eval_resize_for(int size);

// RandomCrop(size, padding).get_params on the padded image, returned in the coordinates of
// the unpadded image (so top and left may be negative).
CropBox random_crop_box(int height, int width, int size, int padding, Rng& rng);
// RandomResizedCrop.get_params: ten tries at a random area and aspect ratio, then a centre
// crop clamped to the ratio range.
CropBox random_resized_crop_box(int height, int width, double scale_min, double scale_max,
                                double ratio_min, double ratio_max, Rng& rng);
// CenterCrop's box, with Python's round-half-to-even for odd margins.
CropBox center_crop_box(int height, int width, int crop_height, int crop_width);

Image crop(const Image& image, const CropBox& box);
void flip_horizontal(Image& image);
// torchvision Resize(size) with an int: the shorter side becomes `size`, the longer keeps the
// aspect ratio (rounded down); unchanged when it already has that size.
Image resize_shorter_side(const Image& image, int size);
// The height and width resize_shorter_side gives a height x width image.
void shorter_side_dims(int height, int width, int size, int& out_height, int& out_width);

// The seed of one sample's random draws.
uint64_t augment_seed(uint64_t seed, uint64_t epoch, uint64_t sample_index);

// RandomResizedCrop + RandomHorizontalFlip in two halves, so that a decoder can decode only the
// crop: the box needs only the image's size, and finish() takes the box's pixels and gives what
// apply_transform gives for the whole image (the same random draws, in the same order).
class ResizedCropDraw {
 public:
  ResizedCropDraw(const Transform& transform, int height, int width, uint64_t seed,
                  uint64_t epoch, uint64_t sample_index);
  const CropBox& box() const { return box_; }
  Image finish(const Image& cropped);

 private:
  const Transform& transform_;
  Rng rng_;
  CropBox box_;
};

// Applies the transform; the result is transform.size squared, with the image's channels.
// Throws Error when the image is too small for a random crop.
Image apply_transform(const Transform& transform, const Image& image, uint64_t seed,
                      uint64_t epoch, uint64_t sample_index);

}  // namespace rddp::data
