#pragma once
// The CUDA executor: forward and backward of the whole network on cuDNN, cuBLAS and our
// kernels, layer for layer the CPU executor (cpu/executor.h), over the model's flat device
// buffers. Every activation, gradient and workspace is allocated when it is built; a step only
// enqueues work on the context's stream, and never waits for the device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "resnet_ddp/batchnorm_impl.h"
#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/cudnn_descriptors.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/param_layout.h"

namespace rddp::cuda {

// Called as each parameter's gradient is enqueued, in ParamLayout order: the gradient is only
// final once the work enqueued on the compute stream so far has run (record an event there).
using GradReadyFn = std::function<void(const TensorInfo&)>;

namespace detail {
class ExecutorImpl;
}

// The network's input for one forward, on the device: float images [batch, in_channels, height,
// width], normalised; or a batch as uploaded, uint8 pixels [batch, height, width, in_channels],
// with the channels' means then standard deviations (2 * in_channels floats), which forward
// normalises in the pass that converts the input to the activations' type and layout.
struct NetworkInput {
  const float* images = nullptr;
  const uint8_t* pixels = nullptr;
  const float* mean_stddev = nullptr;
};

// The model's flat buffers on the device, laid out by the ParamLayout.
struct DeviceModel {
  float* params = nullptr;
  float* grads = nullptr;
  float* running = nullptr;  // BatchNorm running_mean / running_var
  // bfloat16 mixed precision only: the parameters rounded to bfloat16, same layout, which the
  // convolutions and the fc read (BatchNorm reads the float ones). The owner keeps it equal to
  // round(params) whenever a step runs.
  const __nv_bfloat16* params_bf16 = nullptr;
  // float16 mixed precision only: the same, rounded to float16.
  const __half* params_fp16 = nullptr;
};

// How an executor computes. math: its convolutions' and GEMMs' types, layout and algorithm
// choice (conv_algorithms.h):
// - math.data_type is the activations' type: CUDNN_DATA_FLOAT, or CUDNN_DATA_BFLOAT16 (or
//   CUDNN_DATA_HALF, with params_fp16, likewise) for PyTorch autocast's mixed precision
//   (bfloat16 activations and conv/fc weights, float accumulation, BatchNorm statistics, logits
//   and every parameter gradient in float; the model must then carry params_bf16). Input,
//   logits and gradients are float either way. math.allow_tf32 applies to cuBLAS too.
// - math.format is the activations' layout: CUDNN_TENSOR_NCHW, or CUDNN_TENSOR_NHWC
//   (torch.channels_last), where the executor converts the NCHW input on the device, convolves
//   with an OHWI copy of the weights it writes from the float masters at every forward, and
//   permutes each weight gradient back to OIHW before reporting it. The model's buffers, the
//   input and the logits are the same in both formats.
struct ExecutorOptions {
  MathPolicy math;
  // Whose kernels compute BatchNorm (batchnorm_impl.h): cuDNN's, with the ReLU and the residual
  // add as passes of their own, or ours, with both folded in.
  BatchNormImpl batchnorm = BatchNormImpl::cudnn;
  // Forward will be given pixels (NetworkInput); the executor keeps the normalised input in its
  // own buffer, as it does under mixed precision or NHWC anyway.
  bool pixel_input = false;
};

class Executor {
 public:
  // Plans the network for up to `max_batch` images of height x width, allocates everything, and
  // chooses every convolution's algorithms for `max_batch` (a timed search, which runs the
  // candidates on the real buffers, unless options.math says heuristic). `net`, `layout`,
  // `model` and `context` must outlive the executor.
  Executor(const NetDesc& net, const ParamLayout& layout, const DeviceModel& model, int max_batch,
           int height, int width, ComputeContext& context, const ExecutorOptions& options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Throws Error unless `batch` images can go through forward (1..max_batch; in training, every
  // BatchNorm channel must see more than one value). Enqueues nothing.
  void check_batch(int batch, bool training) const;

  // input: see NetworkInput; pixels only from an executor built with pixel_input. It must stay
  // unchanged until forward's work has run where the executor copies it (pixels, mixed
  // precision, NHWC), else until backward's.
  // Returns the logits, float, [batch, num_classes] on the device, valid until the next forward. Training mode uses and updates the BatchNorm batch statistics (the
  // caller counts num_batches_tracked); evaluation mode uses the running ones.
  //
  // A batch size other than max_batch is prepared the first time it is seen: its descriptors are
  // made and cuDNN's heuristics choose its algorithms within the existing workspace (no timed
  // search, no allocation, no synchronisation).
  const float* forward(const NetworkInput& input, int batch, bool training);
  const float* forward(const float* images, int batch, bool training) {
    return forward(NetworkInput{images, nullptr, nullptr}, batch, training);
  }

  // Gradients of every parameter into the model's grads, given d(loss)/d(logits) of the last
  // training forward (on the device, [batch, num_classes]); reports each through `ready`. Once
  // per training forward: backward writes some gradients over the activations it has used.
  void backward(const float* dlogits, const GradReadyFn& ready = {});

  int max_batch() const { return max_batch_; }
  // Device memory by purpose. Activations, their gradients, the layers' other buffers and each
  // convolution's workspaces lie in one arena, laid out by when each is in use
  // (lifetime_arena.h): activation_bytes is the arena without the workspaces, workspace_bytes
  // what they add to it. search_workspace_bytes: the workspace the timed algorithm search held
  // beside the arena while the executor was built, freed since (0 without a search, or where
  // every convolution's search workspace fitted inside the arena).
  size_t workspace_bytes() const;
  size_t activation_bytes() const;
  size_t search_workspace_bytes() const;
  const ConvAlgorithmCache& algorithms() const;

 private:
  int max_batch_;
  std::unique_ptr<detail::ExecutorImpl> impl_;
};

}  // namespace rddp::cuda
