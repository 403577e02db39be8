#pragma once
// A random training batch in host memory for the engine tests, sized by the engine's config,
// reproducible from a seed.
#include <cstdint>
#include <vector>

#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"

namespace rddp::testing {

struct Batch {
  int size = 0, channels = 0, height = 0, width = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<uint8_t> pixels;  // random_pixel_batch only: what `images` was normalised from
  HostBatch view() const {
    return HostBatch{size, channels, height, width, images.data(), labels.data(), nullptr};
  }
  // The same batch as an engine configured for BatchInput::pixels takes it.
  HostBatch pixel_view() const {
    return HostBatch{size, channels, height, width, nullptr, labels.data(), pixels.data()};
  }
};

// Normal(0, 1) pixels and uniform labels below the config's class count.
inline Batch random_batch(const EngineConfig& config, int size, uint64_t seed) {
  Batch batch{size, config.spec.in_channels, config.height, config.width, {}, {}, {}};
  Rng rng(derive_seed(seed, "batch"));
  batch.images.resize(static_cast<size_t>(size) * batch.channels * batch.height * batch.width);
  for (float& v : batch.images) v = static_cast<float>(rng.normal());
  batch.labels.resize(size);
  for (int32_t& label : batch.labels)
    label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.spec.num_classes)));
  return batch;
}

// Uniform uint8 pixels [size, height, width, channels] and uniform labels, with `images` the
// loader's normalisation of them by the config's pixel_mean and pixel_stddev: the float batch
// an engine configured for BatchInput::normalized_float would be given instead.
inline Batch random_pixel_batch(const EngineConfig& config, int size, uint64_t seed) {
  Batch batch{size, config.spec.in_channels, config.height, config.width, {}, {}, {}};
  Rng rng(derive_seed(seed, "pixel batch"));
  batch.pixels.resize(static_cast<size_t>(size) * batch.channels * batch.height * batch.width);
  for (uint8_t& v : batch.pixels) v = static_cast<uint8_t>(rng.below(256));
  batch.labels.resize(size);
  for (int32_t& label : batch.labels)
    label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.spec.num_classes)));
  batch.images.resize(batch.pixels.size());
  const data::Normalization normalization{"test", config.pixel_mean, config.pixel_stddev};
  data::normalize_to_nchw(batch.pixels.data(), static_cast<size_t>(size), batch.height,
                          batch.width, batch.channels, normalization, batch.images.data());
  return batch;
}

}  // namespace rddp::testing
