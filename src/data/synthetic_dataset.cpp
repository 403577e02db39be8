#include <algorithm>
#include <string>
#include <vector>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"

namespace rddp::data {

namespace {

// Each pixel is its class's colour plus noise in [-32, 31]: distinct enough to learn, noisy
// enough that a network has something to do.
constexpr int kNoiseRange = 64;

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(const SyntheticSpec& spec, size_t count, const char* split)
      : spec_(spec), count_(count), split_(split),
        sample_seed_(derive_seed(spec.seed, std::string("synthetic/") + split)) {
    Rng rng(derive_seed(spec.seed, "synthetic/class-colours"));
    colours_.resize(size_t(spec.num_classes) * spec.channels);
    for (uint8_t& value : colours_) value = uint8_t(32 + rng.below(256 - kNoiseRange));
  }

  size_t size() const override { return count_; }
  int num_classes() const override { return spec_.num_classes; }
  int channels() const override { return spec_.channels; }
  int height() const override { return spec_.height; }
  int width() const override { return spec_.width; }

  Sample get(size_t index) const override {
    RDDP_ASSERT(index < count_);
    Rng rng(sample_seed_ + index);
    Sample sample;
    sample.label = int32_t(rng.below(uint64_t(spec_.num_classes)));
    sample.image = Image(spec_.height, spec_.width, spec_.channels);
    const uint8_t* colour = colours_.data() + size_t(sample.label) * spec_.channels;
    uint64_t bits = 0;
    for (size_t i = 0; i < sample.image.pixels.size(); ++i) {
      if (i % 8 == 0) bits = rng.next_u64();  // eight noise bytes per draw
      const int noise = int(bits & (kNoiseRange - 1)) - kNoiseRange / 2;
      bits >>= 8;
      sample.image.pixels[i] = uint8_t(colour[i % spec_.channels] + noise);
    }
    return sample;
  }

  std::string source(size_t index) const override {
    return "synthetic " + split_ + " sample " + std::to_string(index);
  }
  std::string description() const override {
    return "synthetic " + split_ + " (" + std::to_string(count_) + " images " +
           std::to_string(spec_.width) + "x" + std::to_string(spec_.height) + "x" +
           std::to_string(spec_.channels) + ", " + std::to_string(spec_.num_classes) +
           " classes, seed " + std::to_string(spec_.seed) + ")";
  }

 private:
  SyntheticSpec spec_;
  size_t count_;
  std::string split_;
  uint64_t sample_seed_;
  std::vector<uint8_t> colours_;  // num_classes x channels
};

}  // namespace

Splits make_synthetic(const SyntheticSpec& spec) {
  if (spec.train_count == 0) fail("synthetic data needs at least one training sample");
  if (spec.num_classes < 1) fail("synthetic data needs at least one class, not ", spec.num_classes);
  if (spec.height < 1 || spec.width < 1)
    fail("synthetic images must be at least 1x1, not ", spec.width, "x", spec.height);
  if (spec.channels != 1 && spec.channels != 3)
    fail("synthetic images have 1 or 3 channels, not ", spec.channels);
  Splits splits;
  splits.train = std::make_shared<SyntheticDataset>(spec, spec.train_count, "train");
  if (spec.val_count > 0)
    splits.val = std::make_shared<SyntheticDataset>(spec, spec.val_count, "val");
  return splits;
}

}  // namespace rddp::data
