// The cuBLAS calls of the CUDA engine (src/cuda/cublas_linear.cpp, src/cuda/handles.cpp) on host
// memory, for running the engine on the CPU: column-major GEMM and GEMV as cuBLAS defines them,
// done through the emulated stream (stream_work.h) so that graph capture records them.
//
// Not modelled: kernel choice, math modes (TF32 or not, every product is taken in double and
// rounded once to C's type), and the workspace, which is checked to be device memory but not
// written.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "stream_work.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

double load(const void* p, cudaDataType_t type, int64_t i) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    default: return 0.0;
  }
}

void store(void* p, cudaDataType_t type, int64_t i, double value) {
  const auto f = static_cast<float>(value);
  switch (type) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = f; break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(f); break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half(f); break;
    default: break;
  }
}

size_t type_bytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

bool supported(cudaDataType_t type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF || type == CUDA_R_16F;
}

bool is_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; }

// A column-major matrix of `rows` x `cols` with leading dimension `ld` spans this many elements.
int64_t span(int rows, int cols, int ld) {
  return rows == 0 || cols == 0 ? 0 : static_cast<int64_t>(ld) * (cols - 1) + rows;
}

struct Matrix {
  const void* data;
  cudaDataType_t type;
  int ld;
  cublasOperation_t op;
  // Element (i, j) of op(M).
  double at(int i, int j) const {
    return op == CUBLAS_OP_N ? load(data, type, i + static_cast<int64_t>(j) * ld)
                             : load(data, type, j + static_cast<int64_t>(i) * ld);
  }
};

// C = alpha * op(A) * op(B) + beta * C, C of m x n; beta == 0 does not read C, as cuBLAS
// documents (C may hold anything, NaN included).
void gemm(int m, int n, int k, double alpha, Matrix a, Matrix b, double beta, void* c,
          cudaDataType_t c_type, int ldc) {
  std::vector<double> row_of_a(static_cast<size_t>(k));
  for (int i = 0; i < m; ++i) {
    for (int l = 0; l < k; ++l) row_of_a[static_cast<size_t>(l)] = a.at(i, l);
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int l = 0; l < k; ++l) sum += row_of_a[static_cast<size_t>(l)] * b.at(l, j);
      const int64_t at = i + static_cast<int64_t>(j) * ldc;
      const double old = beta == 0.0 ? 0.0 : beta * load(c, c_type, at);
      store(c, c_type, at, alpha * sum + old);
    }
  }
}

cublasStatus_t gemm_checked(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                            int m, int n, int k, double alpha, const void* a,
                            cudaDataType_t a_type, int lda, const void* b, cudaDataType_t b_type,
                            int ldb, double beta, void* c, cudaDataType_t c_type, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_op(op_a) || !is_op(op_b) || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(a_type) || !supported(b_type) || !supported(c_type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const int a_rows = op_a == CUBLAS_OP_N ? m : k, a_cols = op_a == CUBLAS_OP_N ? k : m;
  const int b_rows = op_b == CUBLAS_OP_N ? k : n, b_cols = op_b == CUBLAS_OP_N ? n : k;
  if (lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
      ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!emu::is_device_memory(a, span(a_rows, a_cols, lda) * type_bytes(a_type)) ||
      !emu::is_device_memory(b, span(b_rows, b_cols, ldb) * type_bytes(b_type)) ||
      !emu::is_device_memory(c, span(m, n, ldc) * type_bytes(c_type)))
    return CUBLAS_STATUS_INVALID_VALUE;
  const Matrix ma{a, a_type, lda, op_a}, mb{b, b_type, ldb, op_b};
  emu::enqueue(handle->stream, [=] { gemm(m, n, k, alpha, ma, mb, beta, c, c_type, ldc); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

// The version of the cuBLAS headers it stands in for (resnet_ddp --version asks).
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes != 0 && !emu::is_device_memory(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                           int m, int n, int k, const float* alpha, const float* a, int lda,
                           const float* b, int ldb, const float* beta, float* c, int ldc) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return gemm_checked(handle, op_a, op_b, m, n, k, *alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb,
                      *beta, c, CUDA_R_32F, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                            int m, int n, int k, const void* alpha, const void* a,
                            cudaDataType a_type, int lda, const void* b, cudaDataType b_type,
                            int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t /*algorithm*/) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // Float scalars go with the float compute types, the only ones the engine uses.
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // A and B of one type; C of that type or float (the rows of cuBLAS's GemmEx table).
  if (a_type != b_type || (c_type != a_type && c_type != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return gemm_checked(handle, op_a, op_b, m, n, k, *static_cast<const float*>(alpha), a, a_type,
                      lda, b, b_type, ldb, *static_cast<const float*>(beta), c, c_type, ldc);
}

cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t op, int m, int n,
                           const float* alpha, const float* a, int lda, const float* x, int incx,
                           const float* beta, float* y, int incy) {
  if (alpha == nullptr || beta == nullptr || incx != 1 || incy != 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  // y = op(A) x is the product of op(A) (rows x cols) and x as a cols x 1 matrix.
  const int rows = op == CUBLAS_OP_N ? m : n, cols = op == CUBLAS_OP_N ? n : m;
  if (!is_op(op) || lda < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
  return gemm_checked(handle, op, CUBLAS_OP_N, rows, 1, cols, *alpha, a, CUDA_R_32F, lda, x,
                      CUDA_R_32F, cols > 1 ? cols : 1, *beta, y, CUDA_R_32F,
                      rows > 1 ? rows : 1);
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized (emulated)";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument (emulated)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported (emulated)";
    default: return "unknown error (emulated)";
  }
}

}  // extern "C"
