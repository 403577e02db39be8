#pragma once
// Device buffers for the GPU tests: filled from host vectors, read back, or poisoned with all
// bits set (NaN in every float, -1 in every integer) so that any element a kernel forgets to
// write fails the comparison that follows.
#include <cuda_runtime_api.h>

#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"

namespace rddp::testing {

template <typename T>
cuda::DeviceBuffer<T> to_device(const std::vector<T>& host, cudaStream_t stream) {
  cuda::DeviceBuffer<T> device(host.size());
  cuda::copy_to_device(device.get(), host.data(), host.size(), stream);
  return device;
}

template <typename T>
cuda::DeviceBuffer<T> poisoned(size_t count, cudaStream_t stream) {
  cuda::DeviceBuffer<T> device(count);
  RDDP_CUDA_CHECK(cudaMemsetAsync(device.get(), 0xff, device.bytes(), stream));
  return device;
}

template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer<T>& device, cudaStream_t stream) {
  return cuda::download(device.get(), device.size(), stream);
}

}  // namespace rddp::testing
