#include "resnet_ddp/data/normalize.h"

#include <vector>

#include "resnet_ddp/kernel_math/pixel.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

struct Preset {
  const char* name;
  std::vector<float> mean, stddev;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"imagenet", {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}},
      {"cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
      {"cifar100", {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}},
      {"mnist", {0.1307f}, {0.3081f}},
      {"fashion-mnist", {0.2860f}, {0.3530f}},
  };
  return table;
}

}  // namespace

Normalization normalization_preset(const std::string& name, int channels) {
  if (name == "none")
    return {name, std::vector<float>(size_t(channels), 0.0f), std::vector<float>(size_t(channels), 1.0f)};
  std::string choices;
  for (const Preset& preset : presets()) {
    if (name == preset.name) {
      if (int(preset.mean.size()) != channels)
        fail("the ", name, " normalisation is for ", preset.mean.size(), "-channel images, but "
             "these have ", channels, ": choose another normalisation (or none)");
      return {name, preset.mean, preset.stddev};
    }
    choices += std::string(preset.name) + ", ";
  }
  fail("unknown normalisation '", name, "': choose one of ", choices, "none");
}

void normalize_to_nchw(const uint8_t* hwc, size_t count, int height, int width, int channels,
                       const Normalization& normalization, float* nchw) {
  if (int(normalization.mean.size()) != channels || int(normalization.stddev.size()) != channels)
    fail("the ", normalization.name, " normalisation has ", normalization.mean.size(),
         " channels, the images ", channels);
  // A byte has 256 values: look each channel's results up rather than divide twice per value
  // (the same function fills the table, so the same bits, in a third of the time).
  std::vector<float> table(size_t(channels) * 256);
  for (int c = 0; c < channels; ++c)
    for (int value = 0; value < 256; ++value)
      table[size_t(c) * 256 + size_t(value)] = pixel::normalized(
          uint8_t(value), normalization.mean[size_t(c)], normalization.stddev[size_t(c)]);
  const size_t plane = size_t(height) * width;
  for (size_t n = 0; n < count; ++n) {
    const uint8_t* image = hwc + n * plane * channels;
    float* out = nchw + n * plane * channels;
    for (int c = 0; c < channels; ++c) {
      const float* lookup = table.data() + size_t(c) * 256;
      float* out_plane = out + size_t(c) * plane;
      for (size_t p = 0; p < plane; ++p) out_plane[p] = lookup[image[p * channels + c]];
    }
  }
}

}  // namespace rddp::data
