#pragma once
// RDDP_CUBLAS_CHECK(cublasSgemm(...)): a failed cuBLAS call throws as check.h says.
#include <cublas_v2.h>

#include <string>

#include "resnet_ddp/cuda/check.h"

namespace rddp::cuda {

namespace detail {

inline const char* cublas_hint(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "cuBLAS could not get GPU memory for its handle or workspace: lower --batch-size, "
             "or check with nvidia-smi that no other process holds memory on this GPU";
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "This GPU or CUDA version does not support the requested cuBLAS operation: use a "
             "newer GPU or CUDA toolkit, or report it with the GPU model";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "cuBLAS was given invalid arguments: a bug in resnet_ddp; please report it with "
             "the command line";
    default:
      return kFindTheCause;
  }
}

}  // namespace detail

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  detail::fail_call("cuBLAS", call, file, line,
                    std::string(cublasGetStatusName(status)) + " (" +
                        cublasGetStatusString(status) + ")",
                    detail::cublas_hint(status));
}

}  // namespace rddp::cuda

#define RDDP_CUBLAS_CHECK(call) ::rddp::cuda::check_cublas((call), #call, __FILE__, __LINE__)
