// AdamW and SGD over the flat parameter buffer: one launch updates every parameter. The
// per-element maths is include/resnet_ddp/kernel_math/adamw.h and include/resnet_ddp/kernel_math/sgd.h, shared with
// src/optimizer.cpp; these kernels only move the data.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "grid_stride.h"
#include "resnet_ddp/kernel_math/weight_decay.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 4;
// A grid-stride loop over at most this many blocks: enough to fill any current GPU several
// times over, few enough that the one-off cost per thread (reading the scalars) stays small.
constexpr size_t kMaxBlocks = 4096;

// Four consecutive elements, aligned so that one instruction loads or stores them all.
template <typename T>
struct alignas(kVector * sizeof(T)) Vec {
  T v[kVector];
};

template <typename T>
__device__ Vec<T> load_vec(const T* base, size_t vec_index) {
  return reinterpret_cast<const Vec<T>*>(base)[vec_index];
}

template <typename T>
__device__ void store_vec(T* base, size_t vec_index, const Vec<T>& value) {
  reinterpret_cast<Vec<T>*>(base)[vec_index] = value;
}

template <typename Scalars>
__device__ Scalars read_scalars(const Scalars* from_device, const Scalars& by_value) {
  return from_device != nullptr ? *from_device : by_value;
}

// Rounds updated parameters into the 16-bit copy, if there is one.
__device__ void store_copy(const ParamCopy16& copy, size_t vec_index, const Vec<float>& p) {
  if (copy.bf16 != nullptr) {
    Vec<__nv_bfloat16> out;
#pragma unroll
    for (int k = 0; k < kVector; ++k) out.v[k] = __float2bfloat16_rn(p.v[k]);
    store_vec(copy.bf16, vec_index, out);
  } else if (copy.fp16 != nullptr) {
    Vec<__half> out;
#pragma unroll
    for (int k = 0; k < kVector; ++k) out.v[k] = __float2half_rn(p.v[k]);
    store_vec(copy.fp16, vec_index, out);
  }
}
__device__ void store_copy_one(const ParamCopy16& copy, size_t i, float p) {
  if (copy.bf16 != nullptr)
    copy.bf16[i] = __float2bfloat16_rn(p);
  else if (copy.fp16 != nullptr)
    copy.fp16[i] = __float2half_rn(p);
}

// What a step does about loss scaling: nothing (no state: gradients taken as they are, bit for
// bit as before loss scaling existed), unscale, or skip.
struct Unscaling {
  bool active = false;
  float inverse_scale = 1.0f;
  __device__ float operator()(float grad) const {
    return active ? loss_scale::unscale(grad, inverse_scale) : grad;
  }
};

// Reads the step's verdict; false: the step is skipped, and the kernel must write nothing.
__device__ bool read_unscaling(const loss_scale::StepState* state, Unscaling& unscaling) {
  if (state == nullptr) return true;
  if (state->found_inf != 0) return false;
  unscaling.active = true;
  unscaling.inverse_scale = state->inverse_scale;
  return true;
}

// Elements [0, vector_elements) go four at a time, the rest one at a time; vector_elements is
// 0 when the pointers are not all aligned for vector access. See kernels.h for `copy` and
// `scaling`.
template <typename Grad>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* __restrict__ params, const Grad* __restrict__ grads,
                 float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, ParamCopy16 copy,
                 size_t elements, size_t vector_elements,
                 const adamw::Scalars<float>* device_scalars,
                 adamw::Scalars<float> value_scalars,
                 const loss_scale::StepState* __restrict__ scaling,
                 const uint32_t* __restrict__ no_decay) {
  Unscaling unscale;
  if (!read_unscaling(scaling, unscale)) return;
  const adamw::Scalars<float> s = read_scalars(device_scalars, value_scalars);
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = first; i < vector_elements / kVector; i += stride) {
    Vec<float> p = load_vec(params, i), m = load_vec(exp_avg, i), v = load_vec(exp_avg_sq, i);
    const Vec<Grad> g = load_vec(grads, i);
#pragma unroll
    for (int k = 0; k < kVector; ++k)
      adamw::update(p.v[k], unscale(static_cast<float>(g.v[k])), m.v[k], v.v[k], s,
                    weight_decay::applies(no_decay, i * kVector + k));
    store_vec(params, i, p);
    store_vec(exp_avg, i, m);
    store_vec(exp_avg_sq, i, v);
    store_copy(copy, i, p);
  }
  for (size_t i = vector_elements + first; i < elements; i += stride) {
    adamw::update(params[i], unscale(static_cast<float>(grads[i])), exp_avg[i], exp_avg_sq[i],
                  s, weight_decay::applies(no_decay, i));
    store_copy_one(copy, i, params[i]);
  }
}

template <typename Grad>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(float* __restrict__ params, const Grad* __restrict__ grads,
               float* __restrict__ momentum_buffer, ParamCopy16 copy, size_t elements,
               size_t vector_elements, const sgd::Scalars<float>* device_scalars,
               sgd::Scalars<float> value_scalars,
               const loss_scale::StepState* __restrict__ scaling,
               const uint32_t* __restrict__ no_decay) {
  Unscaling unscale;
  if (!read_unscaling(scaling, unscale)) return;
  const sgd::Scalars<float> s = read_scalars(device_scalars, value_scalars);
  const bool has_buffer = s.momentum != 0.0f;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = first; i < vector_elements / kVector; i += stride) {
    Vec<float> p = load_vec(params, i);
    Vec<float> buf = has_buffer ? load_vec(momentum_buffer, i) : Vec<float>{};
    const Vec<Grad> g = load_vec(grads, i);
#pragma unroll
    for (int k = 0; k < kVector; ++k)
      sgd::update(p.v[k], unscale(static_cast<float>(g.v[k])), buf.v[k], s,
                  weight_decay::applies(no_decay, i * kVector + k));
    store_vec(params, i, p);
    if (has_buffer) store_vec(momentum_buffer, i, buf);
    store_copy(copy, i, p);
  }
  for (size_t i = vector_elements + first; i < elements; i += stride) {
    float unused = 0.0f;
    sgd::update(params[i], unscale(static_cast<float>(grads[i])),
                has_buffer ? momentum_buffer[i] : unused, s, weight_decay::applies(no_decay, i));
    store_copy_one(copy, i, params[i]);
  }
}

bool vector_aligned(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

// The part of the buffer the vector loop covers: all of it but a tail of fewer than four
// elements, or none of it when a pointer is misaligned. A Grad vector is 16 bytes for float and
// 8 for bf16, so 16-byte alignment of every pointer covers both (and the 16-bit copy's).
size_t vector_part(size_t elements, std::initializer_list<const void*> pointers) {
  for (const void* pointer : pointers)
    if (pointer != nullptr && !vector_aligned(pointer)) return 0;
  return elements / kVector * kVector;
}

unsigned grid_for(size_t elements) {
  return grid_stride_blocks(static_cast<int64_t>(elements), int64_t{kThreads} * kVector,
                            kMaxBlocks);
}

template <typename Grad>
void launch_adamw(float* params, const Grad* grads, float* exp_avg, float* exp_avg_sq,
                  size_t elements, const adamw::Scalars<float>* device_scalars,
                  const adamw::Scalars<float>& value_scalars, cudaStream_t stream,
                  ParamCopy16 copy, const loss_scale::StepState* scaling,
                  const uint32_t* no_decay) {
  RDDP_ASSERT(copy.bf16 == nullptr || copy.fp16 == nullptr);
  if (elements == 0) return;
  const size_t vector_elements =
      vector_part(elements, {params, grads, exp_avg, exp_avg_sq, copy.bf16, copy.fp16});
  adamw_kernel<Grad><<<grid_for(elements), kThreads, 0, stream>>>(
      params, grads, exp_avg, exp_avg_sq, copy, elements, vector_elements, device_scalars,
      value_scalars, scaling, no_decay);
  RDDP_CUDA_CHECK_LAUNCH("adamw_kernel");
}

template <typename Grad>
void launch_sgd(float* params, const Grad* grads, float* momentum_buffer, size_t elements,
                const sgd::Scalars<float>* device_scalars, const sgd::Scalars<float>& value_scalars,
                cudaStream_t stream, ParamCopy16 copy, const loss_scale::StepState* scaling,
                const uint32_t* no_decay) {
  RDDP_ASSERT(copy.bf16 == nullptr || copy.fp16 == nullptr);
  if (elements == 0) return;
  const size_t vector_elements =
      vector_part(elements, {params, grads, momentum_buffer, copy.bf16, copy.fp16});
  sgd_kernel<Grad><<<grid_for(elements), kThreads, 0, stream>>>(
      params, grads, momentum_buffer, copy, elements, vector_elements, device_scalars,
      value_scalars, scaling, no_decay);
  RDDP_CUDA_CHECK_LAUNCH("sgd_kernel");
}

}  // namespace

template <typename Grad>
void adamw_step(float* params, const Grad* grads, float* exp_avg, float* exp_avg_sq,
                size_t elements, const adamw::Scalars<float>& scalars, cudaStream_t stream,
                ParamCopy16 copy, const loss_scale::StepState* scaling,
                const uint32_t* no_decay) {
  launch_adamw(params, grads, exp_avg, exp_avg_sq, elements, nullptr, scalars, stream, copy,
               scaling, no_decay);
}

template <typename Grad>
void adamw_step(float* params, const Grad* grads, float* exp_avg, float* exp_avg_sq,
                size_t elements, const adamw::Scalars<float>* device_scalars,
                cudaStream_t stream, ParamCopy16 copy, const loss_scale::StepState* scaling,
                const uint32_t* no_decay) {
  RDDP_ASSERT(device_scalars != nullptr);
  launch_adamw(params, grads, exp_avg, exp_avg_sq, elements, device_scalars, {}, stream, copy,
               scaling, no_decay);
}

template <typename Grad>
void sgd_step(float* params, const Grad* grads, float* momentum_buffer, size_t elements,
              const sgd::Scalars<float>& scalars, cudaStream_t stream, ParamCopy16 copy,
              const loss_scale::StepState* scaling, const uint32_t* no_decay) {
  RDDP_ASSERT(momentum_buffer != nullptr || scalars.momentum == 0.0f);
  launch_sgd(params, grads, momentum_buffer, elements, nullptr, scalars, stream, copy,
             scaling, no_decay);
}

template <typename Grad>
void sgd_step(float* params, const Grad* grads, float* momentum_buffer, size_t elements,
              const sgd::Scalars<float>* device_scalars, cudaStream_t stream, ParamCopy16 copy,
              const loss_scale::StepState* scaling, const uint32_t* no_decay) {
  RDDP_ASSERT(device_scalars != nullptr);
  launch_sgd(params, grads, momentum_buffer, elements, device_scalars, {}, stream, copy,
             scaling, no_decay);
}

#define RDDP_INSTANTIATE_OPTIMIZERS(Grad)                                                          \
  template void adamw_step<Grad>(float*, const Grad*, float*, float*, size_t,                      \
                                 const adamw::Scalars<float>&, cudaStream_t, ParamCopy16,          \
                                 const loss_scale::StepState*, const uint32_t*);                   \
  template void adamw_step<Grad>(float*, const Grad*, float*, float*, size_t,                      \
                                 const adamw::Scalars<float>*, cudaStream_t, ParamCopy16,          \
                                 const loss_scale::StepState*, const uint32_t*);                   \
  template void sgd_step<Grad>(float*, const Grad*, float*, size_t,                                \
                               const sgd::Scalars<float>&, cudaStream_t, ParamCopy16,              \
                               const loss_scale::StepState*, const uint32_t*);                     \
  template void sgd_step<Grad>(float*, const Grad*, float*, size_t,                                \
                               const sgd::Scalars<float>*, cudaStream_t, ParamCopy16,              \
                               const loss_scale::StepState*, const uint32_t*);
RDDP_INSTANTIATE_OPTIMIZERS(float)
RDDP_INSTANTIATE_OPTIMIZERS(__nv_bfloat16)
#undef RDDP_INSTANTIATE_OPTIMIZERS

}  // namespace rddp::cuda
