#include "resnet_ddp/cuda/device.h"

#include <cuda_runtime_api.h>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

int cuda_device_count_or_zero(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // Clear the error so that the next checked call does not report it as its own.
    cudaGetLastError();
    if (reason != nullptr)
      *reason = std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
    return 0;
  }
  if (count == 0 && reason != nullptr) *reason = "the CUDA runtime reports 0 devices";
  return count;
}

std::string select_device(int index) {
  std::string reason;
  const int count = cuda_device_count_or_zero(&reason);
  if (count == 0)
    fail("no CUDA device answers (", reason, "): check nvidia-smi, CUDA_VISIBLE_DEVICES and that ",
         "the job asked for GPUs (Slurm: --gpus-per-task or --gres=gpu:N); or run on the CPU ",
         "with --device cpu");
  if (index < 0 || index >= count)
    fail("CUDA device ", index, " does not exist: this process sees ", count, " device",
         count == 1 ? "" : "s", " (0..", count - 1, "); check CUDA_VISIBLE_DEVICES and the number ",
         "of ranks started per node");
  RDDP_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp properties;
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
  return "cuda:" + std::to_string(index) + " (" + properties.name + ")";
}

}  // namespace rddp::cuda
