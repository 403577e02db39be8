#pragma once
// A random training batch in host memory for the engine tests, sized by the engine's config,
// reproducible from a seed.
#include <cstdint>
#include <vector>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"

namespace rddp::testing {

struct Batch {
  int size = 0, channels = 0, height = 0, width = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;
  HostBatch view() const {
    return HostBatch{size, channels, height, width, images.data(), labels.data()};
  }
};

// Normal(0, 1) pixels and uniform labels below the config's class count.
inline Batch random_batch(const EngineConfig& config, int size, uint64_t seed) {
  Batch batch{size, config.spec.in_channels, config.height, config.width, {}, {}};
  Rng rng(derive_seed(seed, "batch"));
  batch.images.resize(static_cast<size_t>(size) * batch.channels * batch.height * batch.width);
  for (float& v : batch.images) v = static_cast<float>(rng.normal());
  batch.labels.resize(size);
  for (int32_t& label : batch.labels)
    label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.spec.num_classes)));
  return batch;
}

}  // namespace rddp::testing
