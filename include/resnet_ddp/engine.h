#pragma once
// A training engine: one device's copy of the model and optimizer, and the step over them.
// The trainer, the distributed reducer and checkpointing see only this interface; the CPU
// engine (src/cpu) and the CUDA engine (src/cuda) implement it over the same ModelSpec.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/kernel_math/loss_scale.h"
#include "resnet_ddp/gpu_peaks.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/optimizer.h"

namespace rddp {

enum class DeviceKind { cpu, cuda };
const char* to_string(DeviceKind kind);

// How the CUDA engine computes (the CPU engine computes in float32 and refuses bf16):
//   tf32: float32 storage, TF32 tensor cores in convolutions and matrix products (PyTorch's
//         default for cuDNN convolutions);
//   fp32: strict float32;
//   bf16: mixed precision as torch.autocast(dtype=torch.bfloat16): convolutions and the fc on
//         bfloat16 activations and weight copies with float accumulation, BatchNorm on bfloat16
//         activations with float parameters and statistics, logits, loss, every gradient handed
//         to the reducer and the optimizer, and the optimizer state in float32. The flat float
//         buffers (params, grads, moments) are the same as in float32 training.
//   fp16: the same with float16 storage, as torch.autocast(dtype=torch.float16) with
//         torch.cuda.amp.GradScaler: d(loss)/d(logits) is multiplied by a dynamic loss scale
//         (include/resnet_ddp/kernel_math/loss_scale.h) so that small gradients survive float16, the optimizer
//         divides it out, and a step whose gradients hold an Inf or a NaN is skipped (nothing
//         changes, the step count included) and halves the scale, instead of ending training.
enum class Precision { tf32, fp32, bf16, fp16 };
const char* to_string(Precision precision);

// How batches reach an engine (EngineConfig::input):
//   normalized_float: float [size, channels, height, width] images, normalised by the loader;
//   pixels: the loader's uint8 [size, height, width, channels] pixels, which the engine
//           normalises itself, (x / 255 - mean[c]) / stddev[c] in float as ToTensor + Normalize
//           (the same bits). The CUDA engine does it on the device in the pass that converts
//           the input anyway: a quarter of the bytes cross the bus, and the loader's threads
//           skip a pass over every image.
enum class BatchInput { normalized_float, pixels };
const char* to_string(BatchInput input);

// One batch as the loader delivers it, in host memory (pinned when a GPU is used).
struct HostBatch {
  int size = 0;  // images in this batch; the last batch of an epoch may be smaller
  int channels = 0, height = 0, width = 0;
  const float* images = nullptr;    // normalized_float: [size, channels, height, width]
  const int32_t* labels = nullptr;  // [size], each in [0, num_classes)
  const uint8_t* pixels = nullptr;  // pixels: [size, height, width, channels]
};

// Sums over batches (and, once reduced, over ranks): loss_sum / count is the mean loss.
struct Metrics {
  double loss_sum = 0.0;
  int64_t correct = 0;       // rows whose first maximal logit is the label (top-1)
  int64_t correct_top5 = 0;  // rows whose label is among the 5 largest logits
  int64_t count = 0;
  // fp16 loss scaling only; the same on every rank, which all take the same decision on the same
  // averaged gradients, so a sum over ranks keeps this rank's values. Steps skipped for
  // non-finite gradients; of these, the ones whose loss itself was not finite, which are left
  // out of loss_sum, correct and count (a mean loss of Inf would tell nothing more).
  int64_t skipped_steps = 0;
  int64_t nonfinite_losses = 0;
  Metrics& operator+=(const Metrics& other) {
    loss_sum += other.loss_sum;
    correct += other.correct;
    correct_top5 += other.correct_top5;
    count += other.count;
    skipped_steps += other.skipped_steps;
    nonfinite_losses += other.nonfinite_losses;
    return *this;
  }
};

// What the distributed reducer inserts into a training step; a single process uses none.
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Before the training forward: DDP broadcasts rank 0's BatchNorm buffers here.
  virtual void before_forward() {}
  // As backward produces each parameter's final gradient, in ParamLayout order. On a GPU the
  // gradient is only enqueued on compute_stream() when this is called.
  virtual void grad_ready(const TensorInfo& tensor) = 0;
  // After backward, before the optimizer: every gradient must be averaged across ranks by the
  // time the optimizer reads it (on a GPU: the compute stream waits for the comm stream).
  virtual void before_optimizer() = 0;

  // CUDA graphs (EngineConfig::cuda_graphs). Hooks that are capturable() have their device work
  // captured with the step: the engine calls capturing(true), then grad_ready and
  // before_optimizer as it enqueues the step into the graph (nothing runs), then
  // capturing(false), whether the capture worked or not. After every launch of the graph, the
  // first included, it calls replayed() in place of those two. before_forward is called eagerly
  // at every step, outside the graph. Steps with hooks that are not capturable run eagerly.
  virtual bool capturable() const { return false; }
  virtual void capturing(bool /*on*/) {}
  virtual void replayed() {}
};

struct OptimizerState {
  int64_t step_count = 0;
  std::vector<float> first_moment, second_moment;  // as CpuOptimizer documents them
  // fp16 only: GradScaler's "scale" and "_growth_tracker". A state without them (saved in
  // another precision) starts the loss scaling afresh from the configured initial scale.
  bool has_loss_scale = false;
  loss_scale::State loss_scale{};
};

struct EngineConfig {
  ModelSpec spec;
  int max_batch = 1;
  int height = 0, width = 0;
  OptimizerConfig optimizer;
  double label_smoothing = 0.0;
  // What each HostBatch carries; with pixels, the per-channel normalisation (one mean and one
  // standard deviation per input channel, on the 0..1 scale).
  BatchInput input = BatchInput::normalized_float;
  std::vector<float> pixel_mean, pixel_stddev;
  // See Precision; the CPU engine takes tf32 and fp32 (both strict float32) only.
  Precision precision = Precision::tf32;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual DeviceKind device() const = 0;
  virtual std::string device_name() const = 0;
  // The dense peak that MFU is taken against at this engine's precision (gpu_peaks.h), and its
  // basis; tflops 0, and why, where there is none.
  virtual DevicePeak peak() const { return {0, "not reported for this device"}; }
  virtual const ParamLayout& layout() const = 0;

  // The flat buffers in the engine's own memory (host or device), laid out by layout(), for
  // collectives: parameters and running statistics are broadcast, gradients allreduced.
  virtual float* params() = 0;
  virtual float* grads() = 0;
  virtual float* running_stats() = 0;
  // The CUDA stream the engine computes on (a cudaStream_t), or null on the CPU.
  virtual void* compute_stream() = 0;

  // Forward in training mode, loss, backward (calling hooks->grad_ready), hooks->
  // before_optimizer(), then one optimizer step with learning rate `lr`. May return before the
  // device has finished computing, but only once the batch's host memory has been read (the
  // loader reuses it); the step's metrics join those read by take_metrics().
  virtual void train_step(const HostBatch& batch, double lr, StepHooks* hooks) = 0;
  // Forward in evaluation mode; metrics likewise.
  virtual void eval_step(const HostBatch& batch) = 0;
  // Waits for the device and returns the metrics gathered since the last call (this rank's),
  // skipped steps included.
  virtual Metrics take_metrics() = 0;

  // Whole state in host memory, for checkpoints and weight files. Waits for the device.
  virtual void save_state(ModelState<float>& model, OptimizerState& optimizer) = 0;
  virtual void load_state(const ModelState<float>& model, const OptimizerState* optimizer) = 0;

  // Starts (on) or stops a profiler's collection, for a profiler started with a capture range
  // (nsys --capture-range=cudaProfilerApi); stopping first waits for the work enqueued so far.
  // The CPU engine has nothing to switch: the trainer's "profiled steps" range marks the steps.
  virtual void profiler_capture(bool /*on*/) {}
};

// Throws Error when the pixel normalisation does not fit the model's input channels.
void check_batch_input(const EngineConfig& config);
// Throws Error when `batch` is not a batch of the engine's image shape, size and input.
void check_batch_fits(const EngineConfig& config, const HostBatch& batch);

std::unique_ptr<Engine> make_cpu_engine(const EngineConfig& config, uint64_t init_seed);

}  // namespace rddp
