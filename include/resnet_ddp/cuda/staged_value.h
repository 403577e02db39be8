#pragma once
// A small value the host sets before each step and kernels read from device memory, such as
// the optimizer's per-step scalars. Read through a pointer, the value can change between
// replays of a captured CUDA graph without capturing it again.
//
// The host writes the value into a pinned slot and enqueues its copy; the slot must not be
// rewritten before that copy has run, so the slots form a ring and each is reused only after
// the event recorded behind its last copy. With the host at most a step or two ahead of the
// device, the wait for that event finds it long passed.
#include <cuda_runtime_api.h>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"

namespace rddp::cuda {

template <typename T>
class StagedValue {
 public:
  StagedValue() : device_(1), slots_(kSlots) {}

  const T* device() const { return device_.get(); }

  // The device copy equals `value` for every kernel enqueued on `stream` after this call.
  void set(const T& value, cudaStream_t stream) {
    const int slot = next_;
    next_ = (next_ + 1) % kSlots;
    RDDP_CUDA_CHECK(cudaEventSynchronize(copied_[slot].get()));
    slots_[slot] = value;
    RDDP_CUDA_CHECK(cudaMemcpyAsync(device_.get(), &slots_[slot], sizeof(T),
                                    cudaMemcpyHostToDevice, stream));
    RDDP_CUDA_CHECK(cudaEventRecord(copied_[slot].get(), stream));
  }

 private:
  static constexpr int kSlots = 4;
  DeviceBuffer<T> device_;
  PinnedBuffer<T> slots_;
  Event copied_[kSlots];
  int next_ = 0;
};

}  // namespace rddp::cuda
