#pragma once
// One entry point for building an engine on either device, so that the trainer's code does not
// depend on which one the user chose.
#include <cstdint>
#include <memory>

#include "resnet_ddp/cuda/engine_options.h"
#include "resnet_ddp/engine.h"

namespace rddp {

// The CPU engine or the CUDA engine for `config`; `cuda` applies to the CUDA engine only.
// Throws Error when the CUDA engine is asked for and no device answers.
std::unique_ptr<Engine> make_engine(DeviceKind kind, const EngineConfig& config,
                                    const CudaEngineOptions& cuda, uint64_t init_seed);

}  // namespace rddp
