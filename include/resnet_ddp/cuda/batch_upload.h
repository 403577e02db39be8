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
//
// A slot holds what the engine's batches carry (EngineConfig::input): float images, or uint8
// pixels, a quarter of the bytes, which the executor normalises on the device.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/engine.h"

namespace rddp::cuda {

class BatchUpload {
 public:
  BatchUpload(int max_batch, int channels, int height, int width, BatchInput input);

  struct Slot {
    int index = 0;
    const float* images = nullptr;    // normalized_float: [size, channels, height, width]
    const uint8_t* pixels = nullptr;  // pixels: [size, height, width, channels]
    const int32_t* labels = nullptr;  // [size]
  };

  // Enqueues the copy of `batch` into the next slot, once the work that last read that slot has
  // run, and makes `compute` wait for the copy. The batch must fit the sizes given above.
  Slot upload(const HostBatch& batch, cudaStream_t compute);
  // The work enqueued so far on `compute` is the last to read `slot`: it may be refilled after.
  void release(const Slot& slot, cudaStream_t compute);
  // Returns once the copy into `slot` has read all of the host memory it was given.
  void wait_until_read(const Slot& slot) const;
  // Device memory of both slots, images and labels.
  size_t bytes() const {
    return images_[0].bytes() + images_[1].bytes() + labels_[0].bytes() + labels_[1].bytes();
  }

 private:
  size_t image_elements_;  // per image
  int max_batch_;
  BatchInput input_;
  size_t image_bytes_;     // per image, as uploaded
  Stream copy_stream_;
  DeviceBuffer<std::byte> images_[2];
  DeviceBuffer<int32_t> labels_[2];
  Event copied_[2], released_[2];
  int next_ = 0;
};

}  // namespace rddp::cuda
