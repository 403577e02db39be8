// torchvision/transforms/transforms.py (RandomCrop, RandomResizedCrop, CenterCrop,
// RandomHorizontalFlip, Resize) and functional.py, as applied to PIL images, torchvision 0.14.
#include "resnet_ddp/data/transform.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "resnet_ddp/data/resize.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

struct ModeName {
  AugmentMode mode;
  const char* name;
};
constexpr ModeName kModeNames[] = {
    {AugmentMode::automatic, "auto"},
    {AugmentMode::none, "none"},
    {AugmentMode::crop_flip, "crop-flip"},
    {AugmentMode::resized_crop_flip, "resized-crop-flip"},
};

// Python's int(round(x)): round half to even, which nearbyint does in the default mode.
int python_round(double x) { return int(std::nearbyint(x)); }

// torch.randint(0, n, (1,)): uniform in [0, n).
int random_below(Rng& rng, int n) { return int(rng.below(uint64_t(n))); }

}  // namespace

const char* to_string(AugmentMode mode) {
  for (const ModeName& entry : kModeNames)
    if (entry.mode == mode) return entry.name;
  return "?";
}

AugmentMode parse_augment_mode(const std::string& text) {
  std::string choices;
  for (const ModeName& entry : kModeNames) {
    if (text == entry.name) return entry.mode;
    choices += std::string(choices.empty() ? "" : ", ") + entry.name;
  }
  fail("unknown augmentation '", text, "': choose one of ", choices);
}

void Transform::validate() const {
  if (size < 1) fail("the image size must be at least 1, not ", size);
  if (resize < 0) fail("the resize size must not be negative (", resize, ")");
  if (padding < 0) fail("the crop padding must not be negative (", padding, ")");
  if (!(scale_min > 0 && scale_min <= scale_max && scale_max <= 1))
    fail("the crop scale range (", scale_min, ", ", scale_max, ") must satisfy 0 < min <= max <= 1");
  if (!(ratio_min > 0 && ratio_min <= ratio_max))
    fail("the crop aspect ratio range (", ratio_min, ", ", ratio_max, ") must satisfy 0 < min <= max");
  if (!(flip_probability >= 0 && flip_probability <= 1))
    fail("the flip probability must lie in [0, 1], not ", flip_probability);
}

std::string to_string(const Transform& t) {
  // Shortest round-trip form, as Python prints these numbers: 0.5, 0.08, 1.3333333333333333.
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", value);
    for (int digits = 1; digits <= 17; ++digits) {
      std::snprintf(text, sizeof(text), "%.*g", digits, value);
      if (std::strtod(text, nullptr) == value) break;
    }
    return std::string(text);
  };
  const std::string size = std::to_string(t.size);
  const std::string flip = " + RandomHorizontalFlip(" + number(t.flip_probability) + ")";
  switch (t.kind) {
    case Transform::Kind::center:
      return (t.resize > 0 ? "Resize(" + std::to_string(t.resize) + ") + " : std::string()) +
             "CenterCrop(" + size + ")";
    case Transform::Kind::random_crop_flip:
      return "RandomCrop(" + size + ", padding=" + std::to_string(t.padding) + ")" + flip;
    case Transform::Kind::random_resized_crop_flip:
      return "RandomResizedCrop(" + size + ", scale=(" + number(t.scale_min) + ", " +
             number(t.scale_max) + "), ratio=(" + number(t.ratio_min) + ", " +
             number(t.ratio_max) + "))" + flip;
  }
  return "?";
}

int eval_resize_for(int size) { return size * 256 / 224; }

CropBox random_crop_box(int height, int width, int size, int padding, Rng& rng) {
  const int padded_height = height + 2 * padding, padded_width = width + 2 * padding;
  if (padded_height < size || padded_width < size)
    fail("a ", width, "x", height, " image padded by ", padding, " is smaller than the ", size,
         "x", size, " random crop: choose a smaller image size or more padding");
  if (padded_height == size && padded_width == size) return {-padding, -padding, size, size};
  const int top = random_below(rng, padded_height - size + 1);
  const int left = random_below(rng, padded_width - size + 1);
  return {top - padding, left - padding, size, size};
}

CropBox random_resized_crop_box(int height, int width, double scale_min, double scale_max,
                                double ratio_min, double ratio_max, Rng& rng) {
  const double area = double(height) * width;
  const double log_ratio_min = std::log(ratio_min), log_ratio_max = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(scale_min, scale_max);
    const double aspect_ratio = std::exp(rng.uniform(log_ratio_min, log_ratio_max));
    const int w = python_round(std::sqrt(target_area * aspect_ratio));
    const int h = python_round(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = random_below(rng, height - h + 1);
      const int left = random_below(rng, width - w + 1);
      return {top, left, h, w};
    }
  }
  // Ten misses: the largest centred crop whose aspect ratio lies in the range.
  const double in_ratio = double(width) / double(height);
  int w = width, h = height;
  if (in_ratio < ratio_min) {
    h = python_round(w / ratio_min);
  } else if (in_ratio > ratio_max) {
    w = python_round(h * ratio_max);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

CropBox center_crop_box(int height, int width, int crop_height, int crop_width) {
  // torchvision pads a too-small image first with (crop - size) // 2 before, after which the
  // crop starts at the padded image's corner.
  auto start = [](int size, int crop) {
    return crop > size ? -((crop - size) / 2) : python_round((size - crop) / 2.0);
  };
  return {start(height, crop_height), start(width, crop_width), crop_height, crop_width};
}

Image crop(const Image& image, const CropBox& box) {
  Image out(box.height, box.width, image.channels);
  // The part of the box inside the image; the rest stays zero.
  const int y0 = std::max(box.top, 0), y1 = std::min(box.top + box.height, image.height);
  const int x0 = std::max(box.left, 0), x1 = std::min(box.left + box.width, image.width);
  if (y0 >= y1 || x0 >= x1) return out;
  const size_t row_bytes = size_t(x1 - x0) * image.channels;
  for (int y = y0; y < y1; ++y)
    std::memcpy(out.at(y - box.top, x0 - box.left), image.at(y, x0), row_bytes);
  return out;
}

void flip_horizontal(Image& image) {
  const int channels = image.channels;
  for (int y = 0; y < image.height; ++y)
    for (int left = 0, right = image.width - 1; left < right; ++left, --right)
      std::swap_ranges(image.at(y, left), image.at(y, left) + channels, image.at(y, right));
}

void shorter_side_dims(int height, int width, int size, int& out_height, int& out_width) {
  const bool portrait = width <= height;
  const int shorter = portrait ? width : height;
  const int longer = portrait ? height : width;
  const int new_longer = int(double(size) * longer / shorter);
  out_width = portrait ? size : new_longer;
  out_height = portrait ? new_longer : size;
}

Image resize_shorter_side(const Image& image, int size) {
  int new_height = 0, new_width = 0;
  shorter_side_dims(image.height, image.width, size, new_height, new_width);
  if (new_width == image.width && new_height == image.height) return image;
  return resize_bilinear(image, new_height, new_width);
}

uint64_t augment_seed(uint64_t seed, uint64_t epoch, uint64_t sample_index) {
  char tag[16];
  for (int i = 0; i < 8; ++i) {
    tag[i] = char(epoch >> (8 * i));
    tag[8 + i] = char(sample_index >> (8 * i));
  }
  return derive_seed(seed, std::string_view(tag, sizeof tag));
}

ResizedCropDraw::ResizedCropDraw(const Transform& transform, int height, int width,
                                 uint64_t seed, uint64_t epoch, uint64_t sample_index)
    : transform_(transform), rng_(augment_seed(seed, epoch, sample_index)) {
  RDDP_ASSERT(transform.kind == Transform::Kind::random_resized_crop_flip);
  box_ = random_resized_crop_box(height, width, transform.scale_min, transform.scale_max,
                                 transform.ratio_min, transform.ratio_max, rng_);
}

Image ResizedCropDraw::finish(const Image& cropped) {
  RDDP_ASSERT(cropped.height == box_.height && cropped.width == box_.width);
  Image out = resize_bilinear(cropped, transform_.size, transform_.size);
  if (rng_.uniform() < transform_.flip_probability) flip_horizontal(out);
  return out;
}

Image apply_transform(const Transform& transform, const Image& image, uint64_t seed,
                      uint64_t epoch, uint64_t sample_index) {
  const int size = transform.size;
  switch (transform.kind) {
    case Transform::Kind::center: {
      const Image resized =
          transform.resize > 0 ? resize_shorter_side(image, transform.resize) : image;
      if (resized.height == size && resized.width == size) return resized;
      return crop(resized, center_crop_box(resized.height, resized.width, size, size));
    }
    case Transform::Kind::random_crop_flip: {
      Rng rng(augment_seed(seed, epoch, sample_index));
      Image out = crop(image, random_crop_box(image.height, image.width, size,
                                              transform.padding, rng));
      if (rng.uniform() < transform.flip_probability) flip_horizontal(out);
      return out;
    }
    case Transform::Kind::random_resized_crop_flip: {
      ResizedCropDraw draw(transform, image.height, image.width, seed, epoch, sample_index);
      return draw.finish(crop(image, draw.box()));
    }
  }
  RDDP_ASSERT(false);
  return {};
}

}  // namespace rddp::data
