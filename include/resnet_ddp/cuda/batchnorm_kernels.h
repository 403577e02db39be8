#pragma once
// Our own BatchNorm2d kernels (kernels/batchnorm.cu; maths: include/resnet_ddp/kernel_math/batchnorm.h), in place
// of cuDNN's legacy BatchNorm (BatchNormLayer), whose NHWC kernels take milliseconds a call on
// an H100. Same semantics as BatchNormLayer and torch.nn.BatchNorm2d: per-channel statistics
// over batch, height and width; eps kEpsilon; running_mean/var move by kMomentum towards the
// batch mean and the *unbiased* variance; save_invstd = 1 / sqrt(biased var + eps). On top of it,
// the forward may add a residual and apply a ReLU in the same pass, and the backward may mask the
// incoming gradient by that ReLU's output, so that a ResNet block needs no separate elementwise
// passes.
//
// Activations (x, y, residual, dy, dx) are T = float, __nv_bfloat16 or __half, in NCHW or NHWC;
// gamma, beta, running and saved statistics and their gradients are float [C], as in
// BatchNormLayer. All pointers are device memory. Every launcher only enqueues work on `stream`
// (no allocation, no synchronisation, a launch configuration fixed by the shape), so a step that
// calls it can be captured in a CUDA graph; it throws Error, before launching anything, on a shape
// or a scratch buffer it cannot take.
//
// Results are reproducible bit for bit: each reduction adds in a fixed order that depends on the
// shape and on the alignment of the pointers (which decides the vector width), never on timing or
// on the GPU model. Statistics and sums are computed in float (Welford/Chan merges for the
// moments); 16-bit values are widened on load and rounded once on store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "resnet_ddp/memory_format.h"

namespace rddp::cuda {

// Equal to BatchNormLayer::kMomentum and kEpsilon (torch.nn.BatchNorm2d's defaults), in the
// float the kernels compute in.
constexpr float kBatchNormMomentum = 0.1f;
constexpr float kBatchNormEpsilon = 1e-5f;

struct BatchNormShape {
  int batch = 1, channels = 1, height = 1, width = 1;
  MemoryFormat format = MemoryFormat::nchw;  // of x, y, residual, dy and dx
};

// Bytes of scratch that forward_train and backward of `shape` need for their per-block partial
// results (at most 768 KiB at ResNet-18's shapes: 12 bytes per channel and block). Scratch holds nothing between calls, so one
// buffer sized for the largest shape serves every BatchNorm of a network that runs them one at
// a time on one stream. It must be 4-byte aligned (cudaMalloc and LifetimeArena give 256).
size_t batchnorm_scratch_bytes(const BatchNormShape& shape);

// Throws Error when training would leave a channel a single value (batch * height * width == 1),
// which has no variance (PyTorch: "Expected more than 1 value per channel when training"), with
// BatchNormLayer::check_trainable's message; forward_train and backward check it too.
void check_batchnorm_trainable(const BatchNormShape& shape);

// Training mode: y = relu?(gamma * (x - mean) * invstd + beta [+ residual]) with the batch's mean
// and biased variance; save_mean and save_invstd receive them for backward; running_mean and
// running_var are updated (either may be null: not tracked). residual may be null; relu applies
// after the residual. y must not alias x, which backward needs as it was; y may alias residual
// (each element of residual is read by the thread that then writes the same element of y).
// With a residual, the sum is rounded to T once, where BatchNorm followed by add_relu rounds the
// BatchNorm output first: the fused result is the more accurate by up to one rounding of T.
// y may be null: the statistics only, for a consumer that normalises on the fly
// (maxpool_forward_of_batchnorm_relu).
//
// relu_bits, when not null (with relu and y), also receives the ReLU's mask as bits for
// ReluMask::of_bits: batchnorm_relu_bits_bytes(shape) bytes. It needs the 16-byte loads the
// shape allows, so x, y and residual must be 16-byte aligned (cudaMalloc and LifetimeArena give
// 256); otherwise it throws Error before launching anything.
template <typename T>
void batchnorm_forward_train(const BatchNormShape& shape, const T* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var,
                             float* save_mean, float* save_invstd, const T* residual, bool relu,
                             T* y, void* scratch, size_t scratch_bytes, cudaStream_t stream,
                             uint8_t* relu_bits = nullptr);

// Bytes of a ReLU mask in bits for a BatchNorm of `shape` in T. Byte i holds the mask of the G
// values y[i * G] ... y[i * G + G - 1] (offsets in y's own layout), value i * G + k in bit k, set
// where the stored y is > 0 or NaN (where relu_backward lets the gradient through). G is the
// widest load the shape allows (16 or 8 bytes, or one value), so that each byte is written by
// one thread: one byte a value at worst (a plane of odd size in NCHW); where the loads are 16
// bytes wide, as at every NHWC shape of ResNet-18, a sixteenth of y's bytes in every type.
template <typename T>
size_t batchnorm_relu_bits_bytes(const BatchNormShape& shape);

// Evaluation mode: the same with the running statistics (invstd = 1 / sqrt(running_var + eps)).
// One elementwise pass, no scratch; y may alias x or residual.
template <typename T>
void batchnorm_forward_eval(const BatchNormShape& shape, const T* x, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var,
                            const T* residual, bool relu, T* y, cudaStream_t stream);

// Where backward finds the mask of a ReLU the forward fused in (none: there was no ReLU).
template <typename T>
struct ReluMask {
  // The forward's y, read: the gradient is masked where y <= 0.
  const T* output = nullptr;
  // Or, where no residual was added before the ReLU, the same y recomputed from x with
  // save_mean, save_invstd, gamma and this beta, exactly as forward_train computed and rounded
  // it: the same mask, bit for bit, without reading y (two passes over memory fewer). beta must
  // hold the values the forward was given.
  const float* beta = nullptr;
  // Or the bits forward_train wrote to relu_bits: the same mask, bit for bit, under a residual
  // too, without reading y (batchnorm_relu_bits_bytes: a sixteenth of its bytes at most shapes).
  // The backward then needs x, dy, dx and masked_dy 16-byte aligned, as the forward did.
  const uint8_t* bits = nullptr;

  static ReluMask none() { return {}; }
  static ReluMask of_output(const T* y) { return {y, nullptr, nullptr}; }
  static ReluMask recomputed(const float* forward_beta) { return {nullptr, forward_beta, nullptr}; }
  static ReluMask of_bits(const uint8_t* relu_bits) { return {nullptr, nullptr, relu_bits}; }
  bool any() const { return output != nullptr || beta != nullptr || bits != nullptr; }
};

// Backward of training mode, given forward_train's x, save_mean and save_invstd. The gradient
// used is g = dy, or, when the ReLU is fused (relu.any()), dy masked to 0 where the forward's
// output <= 0 (relu_backward's rule): the ReLU's backward fused in. dx, dgamma and dbeta are
// overwritten, not accumulated. dx may alias dy.
//
// masked_dy, when not null, also receives g: in a ResNet block the masked gradient of
// relu(bn2 + identity) feeds the identity branch too. It may alias dy (making the masking in
// place) but not dx.
template <typename T>
void batchnorm_backward(const BatchNormShape& shape, const T* x, const T* dy, ReluMask<T> relu,
                        const float* gamma, const float* save_mean, const float* save_invstd,
                        T* dx, float* dgamma, float* dbeta, void* scratch, size_t scratch_bytes,
                        cudaStream_t stream, T* masked_dy = nullptr);

}  // namespace rddp::cuda
