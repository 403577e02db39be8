#pragma once
// Host launchers of our own CUDA kernels. Each one only enqueues work on `stream` (it never
// synchronises), checks the launch, and may be captured into a CUDA graph. The maths of each
// kernel lives in include/resnet_ddp/kernel_math/, shared with its CPU twin.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "resnet_ddp/kernel_math/adamw.h"
#include "resnet_ddp/kernel_math/loss_scale.h"
#include "resnet_ddp/kernel_math/sgd.h"

namespace rddp::cuda {

// ---- Fused softmax + cross-entropy (kernels/softmax_xent.cu; CPU twin: cpu/softmax_xent.h)

// One row's result: the first kernel writes one per row, a second sums them in a fixed order,
// so the loss is reproducible bit for bit with no floating-point atomics.
struct XentRow {
  float loss;            // the row's (smoothed) cross-entropy; NaN when the label is bad
  int32_t correct;       // 1 when the row's first maximal logit is the label
  int32_t correct_top5;  // 1 when the label is among its first 5 (kernel_math/softmax_xent.h's rank)
  int32_t bad_label;     // 1 when the label is outside [0, classes)
};

struct XentMetrics {
  double loss;           // mean over the batch, as nn.CrossEntropyLoss(reduction="mean")
  int64_t correct;       // rows whose first maximal logit is the label
  int64_t correct_top5;  // rows whose label is among the first 5 logits
  int64_t bad_labels;    // rows whose label is outside [0, classes): their loss and dlogits
                         // are NaN; a kernel cannot throw, so the caller must refuse a non-zero
                         // count
};

// logits and dlogits are [batch, classes] row-major on the device, labels [batch]; dlogits may
// be null (evaluation), else it receives d(mean loss)/d(logits). row_workspace holds `batch`
// XentRow; metrics is one XentMetrics on the device (copy it back asynchronously).
// Throws Error when batch < 1, classes < 1 or label_smoothing is outside [0, 1].
template <typename T>
void softmax_cross_entropy(const T* logits, const int32_t* labels, int batch, int classes,
                           float label_smoothing, T* dlogits, XentRow* row_workspace,
                           XentMetrics* metrics, cudaStream_t stream);

// ---- Optimizers over the flat fp32 parameter buffer (kernels/optimizer_kernels.cu)
//
// One launch updates `elements` values in place: fp32 master weights and moments, gradients
// of type Grad (float or __nv_bfloat16). Buffers of 16-byte aligned pointers are read and
// written four elements at a time; any other alignment or length falls back to one at a time.
//
// The per-step scalars (learning rate, bias corrections, step size) come either by value or
// from device memory. They are computed in double as PyTorch does, with adamw::scalars /
// sgd::scalars: by the host from its own step count and schedule, or under float16 loss scaling
// by begin_scaled_step on the device, from the device's step count (cuda/loss_scaling.h). Passed by value they are
// frozen into a captured CUDA graph; passed through a device pointer the graph reads them when
// it replays, so the host writes each step's scalars there first (cudaMemcpyAsync from pinned
// memory on the same stream, before cudaGraphLaunch) and the graph is never captured again
// when the learning rate or the step count changes.

//
// `copy`, when not empty, is a 16-bit copy of the parameters (same layout), bfloat16 or float16:
// each updated parameter is also rounded into it (to nearest even) in the same pass, which is how
// mixed precision keeps the weights its convolutions and fc read in step with the float masters
// at the cost of a 2-byte store per element, rather than a second launch that would read the
// 4-byte masters back.
//
// `scaling`, when not null, is float16 loss scaling's state on the device (see
// cuda/loss_scaling.h), read after begin_scaled_step: each gradient is multiplied by its
// inverse_scale before the update, and when found_inf is set the kernel changes nothing at all
// (parameters, moments, copy), so that the step is skipped without the host knowing.
//
// `no_decay`, when not null, is a device copy of the weight-decay mask
// (include/resnet_ddp/kernel_math/weight_decay.h): the parameters it marks take no weight decay, as a param group
// of weight_decay 0.

struct ParamCopy16 {
  ParamCopy16() = default;
  ParamCopy16(std::nullptr_t) {}
  ParamCopy16(__nv_bfloat16* copy) : bf16(copy) {}
  ParamCopy16(__half* copy) : fp16(copy) {}
  __nv_bfloat16* bf16 = nullptr;  // at most one of the two is set
  __half* fp16 = nullptr;
};

template <typename Grad>
void adamw_step(float* params, const Grad* grads, float* exp_avg, float* exp_avg_sq,
                size_t elements, const adamw::Scalars<float>& scalars, cudaStream_t stream,
                ParamCopy16 copy = {}, const loss_scale::StepState* scaling = nullptr,
                const uint32_t* no_decay = nullptr);
template <typename Grad>
void adamw_step(float* params, const Grad* grads, float* exp_avg, float* exp_avg_sq,
                size_t elements, const adamw::Scalars<float>* device_scalars,
                cudaStream_t stream, ParamCopy16 copy = {},
                const loss_scale::StepState* scaling = nullptr,
                const uint32_t* no_decay = nullptr);

// momentum_buffer may be null only when the scalars' momentum is 0.
template <typename Grad>
void sgd_step(float* params, const Grad* grads, float* momentum_buffer, size_t elements,
              const sgd::Scalars<float>& scalars, cudaStream_t stream, ParamCopy16 copy = {},
              const loss_scale::StepState* scaling = nullptr,
              const uint32_t* no_decay = nullptr);
template <typename Grad>
void sgd_step(float* params, const Grad* grads, float* momentum_buffer, size_t elements,
              const sgd::Scalars<float>* device_scalars, cudaStream_t stream,
              ParamCopy16 copy = {}, const loss_scale::StepState* scaling = nullptr,
              const uint32_t* no_decay = nullptr);

}  // namespace rddp::cuda
