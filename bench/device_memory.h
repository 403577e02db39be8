#pragma once
// Peak device memory of a run, measured the same way for any program: cudaMemGetInfo's "in
// use" (total - free), the highest seen, minus what was in use once the CUDA context existed.
// It counts everything the run added: the engine's buffers, cuDNN and cuBLAS workspaces, the
// timed algorithm search's temporary workspace, NCCL's buffers and the kernels loaded on first
// use. An allocator's own statistics would miss what libraries allocate behind it, and the
// engine frees nothing while it trains, so the peak is reached while it is built or in its
// first steps: a thread samples every millisecond from start() to stop(); sample() adds one
// reading (after the timed steps, say). Device-wide, so other processes on the GPU count too.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "resnet_ddp/cuda/check.h"

namespace rddp::bench {

class DeviceMemoryPeak {
 public:
  // On the current device, whose context must exist (any runtime call makes it).
  DeviceMemoryPeak() {
    RDDP_CUDA_CHECK(cudaGetDevice(&device_));
    baseline_ = in_use();
  }
  ~DeviceMemoryPeak() { stop(); }
  DeviceMemoryPeak(const DeviceMemoryPeak&) = delete;
  DeviceMemoryPeak& operator=(const DeviceMemoryPeak&) = delete;

  void start() {
    running_ = true;
    sampler_ = std::thread([this] {
      // The current device is per thread.
      if (cudaSetDevice(device_) != cudaSuccess) return;
      while (running_) {
        record(in_use());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  void stop() {
    running_ = false;
    if (sampler_.joinable()) sampler_.join();
  }
  void sample() { record(in_use()); }

  // Bytes beyond the baseline at the highest reading, and at the latest.
  size_t peak_bytes() const { return beyond_baseline(peak_); }
  size_t latest_bytes() const { return beyond_baseline(latest_); }

 private:
  size_t in_use() const {
    size_t free = 0, total = 0;
    // A failed reading (the context being torn down) is no reading.
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return total - free;
  }
  void record(size_t bytes) {
    if (bytes == 0) return;
    latest_ = bytes;
    size_t seen = peak_;
    while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes)) {
    }
  }
  size_t beyond_baseline(size_t bytes) const { return bytes > baseline_ ? bytes - baseline_ : 0; }

  int device_ = 0;
  size_t baseline_ = 0;
  std::atomic<size_t> peak_{0}, latest_{0};
  std::atomic<bool> running_{false};
  std::thread sampler_;
};

}  // namespace rddp::bench
