#pragma once
// The stream a model computes on and the library handles bound to it. Each is created once, on
// the current device, and destroyed with its owner.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>

#include "resnet_ddp/cuda/device_buffer.h"

namespace rddp::cuda {

// A stream that does not synchronise with the legacy default stream, so that a library's stray
// cudaMemcpy elsewhere in the process cannot stall the step.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event for ordering work between streams, by default without timing (cheaper to record
// and wait for); EventTiming::on for one that cudaEventElapsedTime may measure between.
enum class EventTiming { off, on };
class Event {
 public:
  explicit Event(EventTiming timing = EventTiming::off);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A compute stream with a cuDNN and a cuBLAS handle bound to it. cuBLAS gets a workspace of its
// own from here, so that it never allocates one lazily inside the first step.
class ComputeContext {
 public:
  ComputeContext();
  ~ComputeContext();
  ComputeContext(const ComputeContext&) = delete;
  ComputeContext& operator=(const ComputeContext&) = delete;

  cudaStream_t stream() const { return stream_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  void synchronize() const { stream_.synchronize(); }

 private:
  struct DestroyCudnn {
    void operator()(cudnnHandle_t handle) const { cudnnDestroy(handle); }
  };
  struct DestroyCublas {
    void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
  };

  Stream stream_;
  std::unique_ptr<cudnnContext, DestroyCudnn> cudnn_;
  std::unique_ptr<cublasContext, DestroyCublas> cublas_;
  DeviceBuffer<std::byte> cublas_workspace_;
};

}  // namespace rddp::cuda
