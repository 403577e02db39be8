#pragma once
// The CUDA engine's settings beyond EngineConfig, for tests that choose them one by one;
// make_cuda_engine(config, seed) (engine.h) takes them from EngineConfig's deterministic and
// conv_timed_search and conv_graph_api.
#include <cstdint>
#include <memory>
#include <string>

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
  // Which cuDNN interface runs the convolutions (EngineConfig::conv_graph_api).
  cuda::ConvApi conv_api = cuda::ConvApi::legacy;
};

std::unique_ptr<Engine> make_cuda_engine(const EngineConfig& config, uint64_t init_seed,
                                         const CudaEngineOptions& options);

// How a CUDA engine's training steps ran (EngineConfig::cuda_graphs), for benchmarks and tests
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
// (EngineConfig::conv_graph_api), so that a benchmark of the graph API can say how much of the
// network it covered. Throws Error unless `engine` was made by make_cuda_engine.
cuda::ConvAlgorithmCache::ApiUse cuda_conv_api_use(const Engine& engine);

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
