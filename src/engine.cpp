#include "resnet_ddp/engine.h"

#include <cmath>

#include "resnet_ddp/error.h"

namespace rddp {

const char* to_string(DeviceKind kind) { return kind == DeviceKind::cpu ? "cpu" : "cuda"; }

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::tf32: return "tf32";
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

const char* to_string(BatchInput input) {
  return input == BatchInput::pixels ? "pixels" : "normalized_float";
}

void check_batch_input(const EngineConfig& config) {
  if (config.input != BatchInput::pixels) return;
  const size_t channels = static_cast<size_t>(config.spec.in_channels);
  if (config.pixel_mean.size() != channels || config.pixel_stddev.size() != channels)
    fail("the pixel normalisation has ", config.pixel_mean.size(), " means and ",
         config.pixel_stddev.size(), " standard deviations for a model of ", channels,
         " input channels; give one of each per channel");
  for (size_t c = 0; c < channels; ++c)
    if (!std::isfinite(config.pixel_mean[c]) || !std::isfinite(config.pixel_stddev[c]) ||
        config.pixel_stddev[c] == 0.0f)
      fail("the pixel normalisation of channel ", c, " (mean ", config.pixel_mean[c],
           ", standard deviation ", config.pixel_stddev[c], ") cannot normalise: both must be ",
           "finite and the standard deviation non-zero");
}

void check_batch_fits(const EngineConfig& config, const HostBatch& batch) {
  if (batch.channels != config.spec.in_channels || batch.height != config.height || batch.width != config.width)
    fail("batch of ", batch.channels, "x", batch.height, "x", batch.width, " images does not match the engine's ",
         config.spec.in_channels, "x", config.height, "x", config.width);
  if (batch.size < 1 || batch.size > config.max_batch)
    fail("batch of ", batch.size, " images does not fit an engine built for 1..", config.max_batch);
  RDDP_ASSERT(batch.labels != nullptr);
  const bool pixels = config.input == BatchInput::pixels;
  const void* carried = pixels ? static_cast<const void*>(batch.pixels) : batch.images;
  const void* other = pixels ? static_cast<const void*>(batch.images) : batch.pixels;
  if (carried == nullptr || other != nullptr)
    fail("internal error: an engine configured for ", to_string(config.input), " batches was ",
         "given a batch with", batch.images ? " float images" : "",
         batch.pixels ? " uint8 pixels" : "", batch.images || batch.pixels ? "" : " no images",
         "; please report this");
}

}  // namespace rddp
