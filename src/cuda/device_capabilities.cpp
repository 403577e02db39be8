#include "resnet_ddp/cuda/device_capabilities.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <sstream>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernel_image.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace {

bool at_least(int major, int minor, int want_major, int want_minor) {
  return major > want_major || (major == want_major && minor >= want_minor);
}

}  // namespace

DeviceCapabilities query_device_capabilities(int device) {
  cudaDeviceProp properties{};
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  DeviceCapabilities capabilities;
  capabilities.index = device;
  capabilities.name = properties.name;
  capabilities.major = properties.major;
  capabilities.minor = properties.minor;
  capabilities.sms = properties.multiProcessorCount;
  return capabilities;
}

std::string missing_kernels_message(const DeviceCapabilities& device, const std::string& built) {
  // nvcc lists 8.0 and 9.0 as "800,900".
  std::string capabilities;
  std::istringstream list(built);
  for (std::string entry; std::getline(list, entry, ',');) {
    const int code = std::atoi(entry.c_str());
    capabilities += (capabilities.empty() ? "" : ", ") + std::to_string(code / 100) + "." +
                    std::to_string(code % 100 / 10);
  }
  const int own = device.major * 10 + device.minor;
  std::ostringstream message;
  message << "this resnet_ddp has no kernels that cuda:" << device.index << ", a " << device.name
          << " of compute capability " << device.major << "." << device.minor << ", can run: it "
          << (capabilities.empty() ? "was built for other GPUs"
                                   : "was built for compute capability " + capabilities)
          << ". Rebuild it with -DCMAKE_CUDA_ARCHITECTURES=" << own;
  if (own < 75)
    message << " and a CUDA 12 toolkit (CUDA 13 dropped compute capabilities below 7.5)";
  return message.str();
}

void require_kernels_for(const DeviceCapabilities& device) {
  const cudaError_t status = kernel_image_status();
  if (status == cudaErrorNoKernelImageForDevice || status == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();  // not sticky: the next checked call must not report it as its own
    fail(missing_kernels_message(device, built_architectures()));
  }
  check_runtime(status, "cudaFuncGetAttributes of a kernel of this build", __FILE__, __LINE__);
}

void require_precision_supported(const DeviceCapabilities& device, Precision precision) {
  if (precision == Precision::bf16 && !at_least(device.major, device.minor, 8, 0))
    fail("--precision bf16 needs a GPU of compute capability 8.0 or later (bfloat16 tensor "
         "cores: A100, H100, H200), but cuda:", device.index, " is a ", device.name,
         " of compute capability ", device.major, ".", device.minor,
         ": use --precision fp16 on V100 and other GPUs below 8.0 (the same mixed precision on "
         "float16 tensor cores, with dynamic loss scaling), or --precision fp32");
}

std::string precision_description(Precision precision, int major, int minor) {
  switch (precision) {
    case Precision::tf32:
      return at_least(major, minor, 8, 0)
                 ? "tf32: TF32 tensor cores in the convolutions and the fc, float32 elsewhere"
                 : "tf32: plain float32 (this GPU has no TF32 units)";
    case Precision::fp32:
      return "fp32: strict float32, no TF32";
    case Precision::bf16:
      return at_least(major, minor, 8, 0)
                 ? "bf16: bfloat16 tensor cores with float32 accumulation, float32 weights "
                   "and optimizer (autocast)"
                 : "bf16: not on this GPU (no bfloat16 tensor cores below compute capability "
                   "8.0)";
    case Precision::fp16:
      return at_least(major, minor, 7, 0)
                 ? "fp16: float16 tensor cores with float32 accumulation, float32 weights and "
                   "optimizer, dynamic loss scaling (autocast with GradScaler)"
                 : "fp16: float16 storage with float32 accumulation, no tensor cores (this GPU "
                   "has none), dynamic loss scaling (autocast with GradScaler)";
  }
  return to_string(precision);
}

}  // namespace rddp::cuda
