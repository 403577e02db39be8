#pragma once
// Owners of GPU and pinned host memory. All device memory of an engine is allocated when it is
// built, through these; nothing is allocated while it trains.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
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

// Many device arrays in one allocation: each request names the pointer to set and the number of
// elements; allocate() makes one cudaMalloc and points every requested pointer at its slice.
// Slices start on 256-byte boundaries, the alignment cudaMalloc itself gives, which cuDNN,
// cuBLAS and vectorised kernels expect.
class DeviceArena {
 public:
  static constexpr size_t kAlignBytes = 256;

  template <typename T>
  void request(T** pointer, size_t count) {
    RDDP_ASSERT(buffer_.size() == 0);  // requests come before allocate()
    const size_t offset = bytes_;
    bytes_ += aligned_bytes<T>(count);
    bind_at(pointer, offset);
  }

  // Where the next request() will start: with request_at(), what lies between two marks can be
  // given a second use.
  size_t mark() const { return bytes_; }

  // `count` elements at byte `offset` of what has been requested already, sharing that memory:
  // the caller answers for nothing else there being read while this slice is in use (a
  // gradient that backward writes only once every activation stored there is dead). `offset`
  // comes from mark() or from an earlier slice's end, so it is aligned.
  template <typename T>
  void request_at(T** pointer, size_t count, size_t offset) {
    RDDP_ASSERT(buffer_.size() == 0);
    RDDP_ASSERT(offset % kAlignBytes == 0 && offset + aligned_bytes<T>(count) <= bytes_);
    bind_at(pointer, offset);
  }

  // What a request of `count` elements takes, padding included.
  template <typename T>
  static size_t aligned_bytes(size_t count) {
    return (count * sizeof(T) + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  }

  // Allocates every requested slice, zero-filled on `stream` (and waited for), and sets the
  // requested pointers.
  void allocate(cudaStream_t stream) {
    RDDP_ASSERT(buffer_.size() == 0);
    buffer_ = DeviceBuffer<std::byte>(bytes_);
    if (bytes_ > 0) {
      RDDP_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, bytes_, stream));
      RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    for (const auto& bind : bindings_) bind(buffer_.get());
    bindings_.clear();
  }

  size_t bytes() const { return bytes_; }
  // The allocation's start, after allocate().
  std::byte* data() const { return buffer_.get(); }

 private:
  template <typename T>
  void bind_at(T** pointer, size_t offset) {
    bindings_.push_back([pointer, offset](std::byte* base) {
      *pointer = reinterpret_cast<T*>(base + offset);
    });
  }

  size_t bytes_ = 0;
  std::vector<std::function<void(std::byte*)>> bindings_;
  DeviceBuffer<std::byte> buffer_;
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
