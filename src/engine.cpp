#include "resnet_ddp/engine.h"

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

void check_batch_fits(const EngineConfig& config, const HostBatch& batch) {
  if (batch.channels != config.spec.in_channels || batch.height != config.height || batch.width != config.width)
    fail("batch of ", batch.channels, "x", batch.height, "x", batch.width, " images does not match the engine's ",
         config.spec.in_channels, "x", config.height, "x", config.width);
  if (batch.size < 1 || batch.size > config.max_batch)
    fail("batch of ", batch.size, " images does not fit an engine built for 1..", config.max_batch);
  RDDP_ASSERT(batch.images != nullptr && batch.labels != nullptr);
}

}  // namespace rddp
