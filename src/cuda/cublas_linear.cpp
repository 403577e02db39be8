// cuBLAS is column-major: a row-major matrix A[r][c] (leading dimension c) is, to cuBLAS, the
// column-major c x r matrix A^T with the same leading dimension. Every product below is
// therefore written for the transposes: to get row-major C = A * B we ask cuBLAS for
// C^T = B^T * A^T, whose operands it already sees, untransposed, in our buffers.
#include "resnet_ddp/cuda/cublas_linear.h"

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cublas_check.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace {

void check_linear(int batch, int in_features, int out_features) {
  if (batch < 1 || in_features < 1 || out_features < 1)
    fail("linear: batch ", batch, ", in_features ", in_features, " and out_features ",
         out_features, " must all be >= 1");
}

}  // namespace

void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const float* x, const float* w, const float* b, float* y) {
  check_linear(batch, in_features, out_features);
  cudaStream_t stream = nullptr;
  RDDP_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  // Every row of y starts as the bias and the product is added with beta = 1, as addmm does:
  // y = fl(x w^T + b) with the bias exact. (A rank-1 product bias * ones would be rounded to
  // TF32 under TF32 maths.)
  broadcast_rows(batch, out_features, b, y, stream);
  const float one = 1.0f;
  // y^T += w * x^T: cuBLAS sees w as w^T (in x out, ld in), so it is transposed back; x is seen
  // as x^T (in x N, ld in) already.
  RDDP_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out_features, batch,
                                in_features, &one, w, in_features, x, in_features, &one, y,
                                out_features));
}

void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const float* dy, const float* w, float* dx) {
  check_linear(batch, in_features, out_features);
  const float one = 1.0f, zero = 0.0f;
  // dx^T (in x N) = w^T (in x out) * dy^T (out x N): exactly what cuBLAS sees in w (ld in) and
  // dy (ld out), so neither is transposed.
  RDDP_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, in_features, batch,
                                out_features, &one, w, in_features, dy, out_features, &zero, dx,
                                in_features));
}

void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const float* x, const float* dy, float* dw) {
  check_linear(batch, in_features, out_features);
  const float one = 1.0f, zero = 0.0f;
  // dw^T (in x out) = x^T (in x N) * dy (N x out): cuBLAS sees x^T in x (ld in) as is, and
  // dy^T in dy (ld out), which it transposes.
  RDDP_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, in_features, out_features,
                                batch, &one, x, in_features, dy, out_features, &zero, dw,
                                in_features));
}

void linear_backward_bias(cublasHandle_t handle, int batch, int out_features, const float* dy,
                          const float* ones, float* db) {
  check_linear(batch, 1, out_features);
  const float one = 1.0f, zero = 0.0f;
  // db (out) = dy^T (out x N, as cuBLAS sees dy with ld out) * ones (N).
  RDDP_CUBLAS_CHECK(cublasSgemv(handle, CUBLAS_OP_N, out_features, batch, &one, dy, out_features,
                                ones, 1, &zero, db, 1));
}

// ---- bfloat16 inputs, float accumulation
//
// cublasGemmEx with computeType CUBLAS_COMPUTE_32F and scaleType CUDA_R_32F (alpha and beta are
// float) accepts A and B of CUDA_R_16BF with C of CUDA_R_16BF or CUDA_R_32F: both rows of the
// cuBLAS GemmEx type table that need compute capability 8.0 or later. A and B must share a type,
// which is why the engine rounds d(loss)/d(logits) to bfloat16 for the two products that read
// it (autocast's backward does the same: the gradient of a bfloat16 matmul is bfloat16). The
// bias gradient keeps the float dlogits and cublasSgemv. Tensor cores are used for these types
// whatever the handle's math mode; CUBLAS_GEMM_DEFAULT lets cuBLAS choose the kernel.
// float16 is the same with CUDA_R_16F (A, B 16F; C 16F or 32F; compute 32F), autocast's
// float16 linear: products accumulated in float, never in half.

namespace {

// cudaDataType_t of the 16-bit storage types.
template <typename T>
constexpr cudaDataType_t gemm_type_of();
template <>
constexpr cudaDataType_t gemm_type_of<__nv_bfloat16>() {
  return CUDA_R_16BF;
}
template <>
constexpr cudaDataType_t gemm_type_of<__half>() {
  return CUDA_R_16F;
}

template <typename T>
void gemm_16bit(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                int n, int k, const T* a, int lda, const T* b, int ldb, float beta, void* c,
                cudaDataType_t c_type, int ldc) {
  const float alpha = 1.0f;
  RDDP_CUBLAS_CHECK(cublasGemmEx(handle, op_a, op_b, m, n, k, &alpha, a, gemm_type_of<T>(), lda,
                                 b, gemm_type_of<T>(), ldb, &beta, c, c_type, ldc,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <typename T>
void linear_forward_16bit(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const T* x, const T* w, const float* b, float* y) {
  check_linear(batch, in_features, out_features);
  cudaStream_t stream = nullptr;
  RDDP_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  // As the float version: the float bias first, the product added onto it (beta 1) in float.
  broadcast_rows(batch, out_features, b, y, stream);
  gemm_16bit(handle, CUBLAS_OP_T, CUBLAS_OP_N, out_features, batch, in_features, w, in_features,
             x, in_features, 1.0f, y, CUDA_R_32F, out_features);
}

template <typename T>
void linear_backward_data_16bit(cublasHandle_t handle, int batch, int in_features,
                                int out_features, const T* dy, const T* w, T* dx) {
  check_linear(batch, in_features, out_features);
  gemm_16bit(handle, CUBLAS_OP_N, CUBLAS_OP_N, in_features, batch, out_features, w, in_features,
             dy, out_features, 0.0f, dx, gemm_type_of<T>(), in_features);
}

template <typename T>
void linear_backward_weight_16bit(cublasHandle_t handle, int batch, int in_features,
                                  int out_features, const T* x, const T* dy, float* dw) {
  check_linear(batch, in_features, out_features);
  gemm_16bit(handle, CUBLAS_OP_N, CUBLAS_OP_T, in_features, out_features, batch, x, in_features,
             dy, out_features, 0.0f, dw, CUDA_R_32F, in_features);
}

}  // namespace

void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const __nv_bfloat16* x, const __nv_bfloat16* w, const float* b, float* y) {
  linear_forward_16bit(handle, batch, in_features, out_features, x, w, b, y);
}

void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const __nv_bfloat16* dy, const __nv_bfloat16* w, __nv_bfloat16* dx) {
  linear_backward_data_16bit(handle, batch, in_features, out_features, dy, w, dx);
}

void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const __nv_bfloat16* x, const __nv_bfloat16* dy, float* dw) {
  linear_backward_weight_16bit(handle, batch, in_features, out_features, x, dy, dw);
}

void linear_forward(cublasHandle_t handle, int batch, int in_features, int out_features,
                    const __half* x, const __half* w, const float* b, float* y) {
  linear_forward_16bit(handle, batch, in_features, out_features, x, w, b, y);
}

void linear_backward_data(cublasHandle_t handle, int batch, int in_features, int out_features,
                          const __half* dy, const __half* w, __half* dx) {
  linear_backward_data_16bit(handle, batch, in_features, out_features, dy, w, dx);
}

void linear_backward_weight(cublasHandle_t handle, int batch, int in_features, int out_features,
                            const __half* x, const __half* dy, float* dw) {
  linear_backward_weight_16bit(handle, batch, in_features, out_features, x, dy, dw);
}

}  // namespace rddp::cuda
