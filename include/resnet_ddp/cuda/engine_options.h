#pragma once
// The CUDA engine's own settings, beside the device-neutral EngineConfig (engine.h). No CUDA
// library header is needed to set them, so that the trainer and the engine factory can carry
// them without compiling against cuDNN.
#include "resnet_ddp/kernel_math/loss_scale.h"
#include "resnet_ddp/batchnorm_impl.h"
#include "resnet_ddp/memory_format.h"

namespace rddp {

namespace cuda {

// How each convolution's algorithm is chosen for the engine's largest batch, as
// torch.backends.cudnn.benchmark True (timed) or False (heuristic); other batch sizes always
// take cuDNN's heuristics.
enum class ConvAlgorithmSearch {
  timed,      // run every candidate once, keep the fastest
  heuristic,  // cuDNN's own ranking, nothing is run
};

// Which cuDNN interface runs the convolutions.
enum class ConvApi {
  legacy,  // cudnnConvolution{Forward,BackwardData,BackwardFilter}: one kernel per algorithm
  graph,   // the graph API's execution plans, one per engine configuration (conv_graph.h)
};
const char* to_string(ConvApi api);

}  // namespace cuda

struct CudaEngineOptions {
  int device_index = 0;  // this rank's GPU
  // How activations are laid out on the device (memory_format.h); parameters, gradients,
  // checkpoints and batches are NCHW / OIHW either way.
  MemoryFormat memory_format = MemoryFormat::nchw;
  // Whose kernels compute BatchNorm (batchnorm_impl.h).
  BatchNormImpl batchnorm = BatchNormImpl::cudnn;
  // Only cuDNN algorithms that give the same bits on every run (torch.backends.cudnn.
  // deterministic); our own kernels and cuBLAS on one stream always do.
  bool deterministic = false;
  cuda::ConvAlgorithmSearch conv_search = cuda::ConvAlgorithmSearch::timed;
  cuda::ConvApi conv_api = cuda::ConvApi::legacy;
  // Capture the training step once (after a few eager warm-up steps) and replay it as a CUDA
  // graph; steps with StepHooks that are not capturable and batches smaller than max_batch stay
  // eager (cuda/graph_step_policy.h).
  bool cuda_graphs = false;
  // fp16 only: GradScaler's settings (its defaults unless a test wants a short growth interval).
  loss_scale::Config loss_scale;
};

}  // namespace rddp
