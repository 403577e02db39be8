#pragma once
// nn.Linear through cuBLAS, over row-major tensors as PyTorch stores them:
// y[N, out] = x[N, in] * w[out, in]^T + b[out]. Device pointers; each call is enqueued on the
// handle's stream and overwrites its output. The handle's math mode decides TF32 or strict
// float32 (see Executor).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace rddp::cuda {

void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const float* x, const float* w, const float* b, float* y);
// dx[N, in] = dy[N, out] * w[out, in]
void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const float* dy, const float* w, float* dx);
// dw[out, in] = dy[N, out]^T * x[N, in]
void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const float* x, const float* dy, float* dw);
// db[out] = sum over the batch of dy[n, out]; `ones` is a device vector of at least `batch`
// ones, the column sum being a product with it.
void linear_backward_bias(cublasHandle_t handle, int batch, int out_features, const float* dy,
                          const float* ones, float* db);

// The same under bfloat16 mixed precision (autocast's linear): bfloat16 inputs and weights,
// products accumulated in float (cublasGemmEx, CUBLAS_COMPUTE_32F). The logits and the weight
// gradient come out in float: finer than autocast, which rounds both to bfloat16 first; the
// input gradient comes out in bfloat16, the activations' type.
void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const __nv_bfloat16* x, const __nv_bfloat16* w, const float* b, float* y);
void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const __nv_bfloat16* dy, const __nv_bfloat16* w, __nv_bfloat16* dx);
void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const __nv_bfloat16* x, const __nv_bfloat16* dy, float* dw);

// And under float16 mixed precision (autocast(dtype=float16)'s linear), the same way: float16
// inputs and weights, float accumulation, float logits and weight gradient, float16 dx.
void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const __half* x, const __half* w, const float* b, float* y);
void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const __half* dy, const __half* w, __half* dx);
void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const __half* x, const __half* dy, float* dw);

}  // namespace rddp::cuda
