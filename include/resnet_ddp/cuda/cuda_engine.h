#pragma once
// The CUDA engine's settings beyond EngineConfig, for tests that choose them one by one;
// make_cuda_engine(config, seed) (engine.h) takes them from EngineConfig's deterministic and
// conv_timed_search.
#include <cstdint>
#include <memory>

#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/engine.h"

namespace rddp {

struct CudaEngineOptions {
  // Only cuDNN algorithms that give the same bits on every run (torch.backends.cudnn.
  // deterministic); our own kernels and cuBLAS on one stream always do.
  bool deterministic = false;
  // How convolution algorithms are chosen for the engine's max_batch (torch.backends.cudnn.
  // benchmark = True is `timed`). Other batch sizes always use cuDNN's heuristics.
  cuda::ConvAlgorithmSearch conv_search = cuda::ConvAlgorithmSearch::timed;
};

std::unique_ptr<Engine> make_cuda_engine(const EngineConfig& config, uint64_t init_seed,
                                         const CudaEngineOptions& options);

}  // namespace rddp
