#pragma once
// Moves each HostBatch to the device on a copy stream of its own, alternating between two
// device slots, so that the copy of one batch overlaps the computation on the one before.
//
// Host memory: a HostBatch may be pageable or pinned. The Engine interface lets the caller
// refill the batch memory as soon as a step returns, so the step must have finished reading it
// by then: wait_until_read() waits for the copy, and only for the copy (which runs beside the
// computation of the previous step, not after it). From pageable memory the driver stages the
// copy through its own pinned buffers, and cudaMemcpyAsync returns when most of it is staged;
// from pinned memory the copy is a DMA that also overlaps the host's work up to the wait.
// Either way the batch is read exactly once.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/engine.h"

namespace rddp::cuda {

class BatchUpload {
 public:
  BatchUpload(int max_batch, int channels, int height, int width);

  struct Slot {
    int index = 0;
    const float* images = nullptr;    // [size, channels, height, width] on the device
    const int32_t* labels = nullptr;  // [size] on the device
  };

  // Enqueues the copy of `batch` into the next slot, once the work that last read that slot has
  // run, and makes `compute` wait for the copy. The batch must fit the sizes given above.
  Slot upload(const HostBatch& batch, cudaStream_t compute);
  // The work enqueued so far on `compute` is the last to read `slot`: it may be refilled after.
  void release(const Slot& slot, cudaStream_t compute);
  // Returns once the copy into `slot` has read all of the host memory it was given.
  void wait_until_read(const Slot& slot) const;

 private:
  size_t image_elements_;  // per image
  int max_batch_;
  Stream copy_stream_;
  DeviceBuffer<float> images_[2];
  DeviceBuffer<int32_t> labels_[2];
  Event copied_[2], released_[2];
  int next_ = 0;
};

}  // namespace rddp::cuda
