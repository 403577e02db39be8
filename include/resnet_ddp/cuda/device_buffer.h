#pragma once
// Owners of GPU and pinned host memory. All device memory of an engine is allocated when it is
// built, through these; nothing is allocated while it trains.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "resnet_ddp/cuda/check.h"

namespace rddp::cuda {

// `count` elements of T in device memory, uninitialised; freed with the object.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count > 0) RDDP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  ~DeviceBuffer() {
    // A destructor cannot report a failure; cudaFree only fails when the context is already lost.
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) cudaFree(data_);
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// `count` elements of T in page-locked host memory, which the GPU reads and writes by DMA, so
// that a cudaMemcpyAsync from or to it is truly asynchronous.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t count) : count_(count) {
    if (count > 0)
      RDDP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* get() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// Blocking copies on `stream`, for set-up, checkpoints and tests (never inside a step).
template <typename T>
void copy_to_device(T* device, const T* host, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  RDDP_CUDA_CHECK(
      cudaMemcpyAsync(device, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <typename T>
void copy_to_host(T* host, const T* device, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  RDDP_CUDA_CHECK(
      cudaMemcpyAsync(host, device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <typename T>
std::vector<T> download(const T* device, size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  copy_to_host(host.data(), device, count, stream);
  return host;
}

}  // namespace rddp::cuda
