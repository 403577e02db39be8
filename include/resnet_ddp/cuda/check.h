#pragma once
// Checks for every CUDA runtime call:
//   RDDP_CUDA_CHECK(cudaMalloc(&ptr, bytes));
//   RDDP_CUDA_CHECK_LAUNCH("softmax_xent_rows");  // right after a <<<...>>> launch
// and what the library checks share (cublas_check.h, cudnn_check.h, ddp/nccl_check.h), so that
// a kernel file includes the runtime's header alone. A failure throws rddp::Error naming
// file:line, the call as written, the library's own name and description of the status, and
// what the user can do about it. main() adds the rank and host and brings the whole job down.
#include <cuda_runtime_api.h>

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
             "-DCMAKE_CUDA_ARCHITECTURES=<its compute capability: 70 for V100 (CUDA 12 only), "
             "80 for A100, 90 for H100 and H200>";
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

}  // namespace detail

inline void check_runtime(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  detail::fail_call("CUDA", call, file, line,
                    std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")",
                    detail::runtime_hint(status));
}

}  // namespace rddp::cuda

#define RDDP_CUDA_CHECK(call) ::rddp::cuda::check_runtime((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration at once (and an earlier
// asynchronous fault, if one is pending). `kernel` is a string literal naming the kernel.
#define RDDP_CUDA_CHECK_LAUNCH(kernel) \
  ::rddp::cuda::check_runtime(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__)
