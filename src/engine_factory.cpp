#include "resnet_ddp/engine_factory.h"

#include "resnet_ddp/cuda/cuda_engine.h"

namespace rddp {

std::unique_ptr<Engine> make_engine(DeviceKind kind, const EngineConfig& config,
                                    const CudaEngineOptions& cuda, uint64_t init_seed) {
  return kind == DeviceKind::cuda ? make_cuda_engine(config, cuda, init_seed)
                                  : make_cpu_engine(config, init_seed);
}

}  // namespace rddp
