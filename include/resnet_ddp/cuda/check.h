#pragma once
// Checks for every CUDA runtime, cuBLAS, cuDNN and NCCL call:
//   RDDP_CUDA_CHECK(cudaMalloc(&ptr, bytes));
//   RDDP_CUDA_CHECK_LAUNCH("softmax_xent_rows");  // right after a <<<...>>> launch
//   RDDP_CUBLAS_CHECK(cublasSgemm(...));  RDDP_CUDNN_CHECK(...);  RDDP_NCCL_CHECK(...);
// A failure throws rddp::Error naming file:line, the call as written, the library's own
// name and description of the status, and what the user can do about it. main() adds the rank
// and host and brings the whole job down.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace detail {

[[noreturn]] inline void fail_call(const char* library, const char* call, const char* file,
                                   int line, const std::string& status, const char* hint) {
  fail(library, " call failed at ", file, ":", line, ": ", call, " returned ", status, ". ", hint);
}

// Asynchronous errors are reported by whichever call comes next, so the default hint says how
// to find the call that caused one.
constexpr const char* kFindTheCause =
    "Errors of asynchronous GPU work surface at a later call: rerun with CUDA_LAUNCH_BLOCKING=1 "
    "to stop at the call that caused it";

inline const char* runtime_hint(cudaError_t status) {
  switch (status) {
    case cudaErrorMemoryAllocation:
      return "The GPU is out of memory: lower --batch-size, or check with nvidia-smi that no "
             "other process holds memory on this GPU";
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
      return "No usable CUDA device is visible to this process: check nvidia-smi, "
             "CUDA_VISIBLE_DEVICES, and that the job asked for GPUs (Slurm: --gpus-per-task or "
             "--gres=gpu:N)";
    case cudaErrorInsufficientDriver:
      return "The NVIDIA driver is older than the CUDA runtime resnet_ddp was built with: update "
             "the driver, or rebuild with the CUDA toolkit the driver supports";
    case cudaErrorDevicesUnavailable:
      return "The GPU is busy or in exclusive-process mode with another process on it: run one "
             "rank per GPU and check nvidia-smi for leftover processes";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "resnet_ddp was not built for this GPU: rebuild with "
             "-DCMAKE_CUDA_ARCHITECTURES=<its compute capability, e.g. 80 for A100, 90 for H100>";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
      return "A GPU kernel faulted and this process's CUDA context is lost; unless the GPU is "
             "faulty this is a bug in resnet_ddp: rerun under compute-sanitizer to locate it, and "
             "report it with the command line";
    case cudaErrorECCUncorrectable:
      return "The GPU reported an uncorrectable memory error: the node needs attention; "
             "exclude it from the job (Slurm: --exclude=<node>)";
    default:
      return kFindTheCause;
  }
}

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

inline const char* cudnn_hint(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  // cuDNN 9 refines each category (BAD_PARAM, NOT_SUPPORTED...) into sub-codes.
  const auto category = static_cast<cudnnStatus_t>(CUDNN_STATUS_CATEGORY(status));
#else
  const cudnnStatus_t category = status;
#endif
  switch (category) {
    case CUDNN_STATUS_BAD_PARAM:
      return "cuDNN was given invalid arguments: a bug in resnet_ddp; please report it with the "
             "command line";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "This cuDNN, driver or GPU cannot run the requested layer configuration: update "
             "cuDNN and the driver, or report it with the GPU model and the model flags";
    case CUDNN_STATUS_INTERNAL_ERROR:
      return "cuDNN failed internally, most often from lack of host or GPU memory: lower "
             "--batch-size; set CUDNN_LOGERR_DBG=1 for cuDNN's own log";
    default:
      return kFindTheCause;
  }
}

inline const char* nccl_hint(ncclResult_t status) {
  switch (status) {
    case ncclUnhandledCudaError:
      return "A CUDA call inside NCCL failed: rerun with NCCL_DEBUG=WARN to see which one";
    case ncclSystemError:
      return "A system call or the network failed inside NCCL (sockets, InfiniBand, shared "
             "memory): rerun with NCCL_DEBUG=INFO; in containers make /dev/shm large enough, and "
             "check that every node reaches the others (NCCL_SOCKET_IFNAME picks the interface)";
    case ncclRemoteError:
      return "Another rank or the network failed: look at the other ranks' messages first";
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return "NCCL was used wrongly, e.g. ranks that disagree on a buffer size: rerun with "
             "NCCL_DEBUG=WARN and report it with the command line";
    case ncclInternalError:
      return "NCCL failed internally: check that every node runs the same NCCL version, rerun "
             "with NCCL_DEBUG=INFO";
    default:
      return "Rerun with NCCL_DEBUG=INFO for NCCL's own account of what happened";
  }
}

}  // namespace detail

inline void check_runtime(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  detail::fail_call("CUDA", call, file, line,
                    std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")",
                    detail::runtime_hint(status));
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  detail::fail_call("cuBLAS", call, file, line,
                    std::string(cublasGetStatusName(status)) + " (" +
                        cublasGetStatusString(status) + ")",
                    detail::cublas_hint(status));
}

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string what = cudnnGetErrorString(status);
#if CUDNN_MAJOR >= 9
  // cuDNN 9 keeps a sentence about the last failure, often naming the offending attribute.
  char detail_text[512] = "";
  cudnnGetLastErrorString(detail_text, sizeof detail_text);
  if (detail_text[0] != '\0') what += std::string(": ") + detail_text;
#endif
  detail::fail_call("cuDNN", call, file, line, what, detail::cudnn_hint(status));
}

inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  std::string what = ncclGetErrorString(status);
  // NCCL keeps a line about its last failure; it often names the peer or the interface.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') what += std::string(": ") + last;
  detail::fail_call("NCCL", call, file, line, what, detail::nccl_hint(status));
}

}  // namespace rddp::cuda

#define RDDP_CUDA_CHECK(call) ::rddp::cuda::check_runtime((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration at once (and an earlier
// asynchronous fault, if one is pending). `kernel` is a string literal naming the kernel.
#define RDDP_CUDA_CHECK_LAUNCH(kernel) \
  ::rddp::cuda::check_runtime(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__)
#define RDDP_CUBLAS_CHECK(call) ::rddp::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define RDDP_CUDNN_CHECK(call) ::rddp::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
#define RDDP_NCCL_CHECK(call) ::rddp::cuda::check_nccl((call), #call, __FILE__, __LINE__)
