#pragma once
// The CUDA engine: the Engine interface (engine.h) on a GPU, and what only it can tell.
#include <cstdint>
#include <memory>
#include <string>

#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/device_capabilities.h"
#include "resnet_ddp/cuda/engine_options.h"
#include "resnet_ddp/engine.h"

namespace rddp {

// Throws Error when no device answers, or when it cannot compute in config.precision
// (cuda/device_capabilities.h), before anything is allocated on it.
std::unique_ptr<Engine> make_cuda_engine(const EngineConfig& config,
                                         const CudaEngineOptions& options, uint64_t init_seed);

// Device `index` as it describes itself, once it is known to run this build's kernels and to
// compute in `precision`; else throws Error naming the fix. The trainer asks before it opens any
// data, and the engine again before it allocates.
cuda::DeviceCapabilities require_capable_device(int index, Precision precision);

// How a CUDA engine's training steps ran (CudaEngineOptions::cuda_graphs), for benchmarks and tests
// that must know the graph was really replayed.
struct CudaGraphStats {
  int64_t eager_steps = 0;
  int64_t captures = 0;        // successful ones; the captured step runs as the first replay
  int64_t replays = 0;         // every step run from the graph, the captured one included
  size_t graph_nodes = 0;      // of the captured graph, 0 if none
  std::string capture_failure; // why the capture failed, empty if it did not
};
// Throws Error unless `engine` was made by make_cuda_engine.
CudaGraphStats cuda_graph_stats(const Engine& engine);

// How a CUDA engine's convolutions run: on the graph API's plans or the legacy API's algorithms
// (CudaEngineOptions::conv_api), so that a benchmark of the graph API can say how much of the
// network it covered. Throws Error unless `engine` was made by make_cuda_engine.
cuda::ConvAlgorithmCache::ApiUse cuda_conv_api_use(const Engine& engine);

// The GPU a CUDA engine computes on, as the device describes itself (name, compute capability,
// SMs). Throws Error unless `engine` was made by make_cuda_engine.
cuda::DeviceCapabilities cuda_device_capabilities(const Engine& engine);

// Where a CUDA engine's device memory goes, by purpose, for benchmarks that set it beside the
// measured peak. Libraries' own allocations (cuDNN, cuBLAS, NCCL, loaded kernels) are not here.
struct CudaMemoryPlan {
  size_t model_bytes = 0;             // parameters, gradients, running stats, optimizer state, 16-bit copies
  size_t activation_bytes = 0;        // activations, their gradients, layers' scratch (one arena)
  size_t conv_workspace_bytes = 0;    // what the convolutions' workspaces add to that arena
  size_t search_workspace_bytes = 0;  // held beside the rest only while the timed algorithm search ran
  size_t input_bytes = 0;             // the batch's two upload slots (and the graph's copy), as uploaded
};
// Throws Error unless `engine` was made by make_cuda_engine.
CudaMemoryPlan cuda_memory_plan(const Engine& engine);

}  // namespace rddp
