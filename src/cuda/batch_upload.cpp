#include "resnet_ddp/cuda/batch_upload.h"

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

BatchUpload::BatchUpload(int max_batch, int channels, int height, int width, BatchInput input)
    : image_elements_(static_cast<size_t>(channels) * height * width),
      max_batch_(max_batch),
      input_(input),
      image_bytes_(image_elements_ * (input == BatchInput::pixels ? sizeof(uint8_t) : sizeof(float))),
      images_{DeviceBuffer<std::byte>(image_bytes_ * max_batch),
              DeviceBuffer<std::byte>(image_bytes_ * max_batch)},
      labels_{DeviceBuffer<int32_t>(max_batch), DeviceBuffer<int32_t>(max_batch)} {}

BatchUpload::Slot BatchUpload::upload(const HostBatch& batch, cudaStream_t compute) {
  RDDP_ASSERT(batch.size >= 1 && batch.size <= max_batch_);
  RDDP_ASSERT(static_cast<size_t>(batch.channels) * batch.height * batch.width == image_elements_);
  const int index = next_;
  next_ = 1 - next_;
  const bool pixels = input_ == BatchInput::pixels;
  std::byte* image_slot = images_[index].get();
  Slot slot{index, pixels ? nullptr : reinterpret_cast<const float*>(image_slot),
            pixels ? reinterpret_cast<const uint8_t*>(image_slot) : nullptr, labels_[index].get()};
  cudaStream_t copy = copy_stream_.get();
  // Waiting for an event never recorded (the first use of a slot) does not wait.
  RDDP_CUDA_CHECK(cudaStreamWaitEvent(copy, released_[index].get(), 0));
  RDDP_CUDA_CHECK(cudaMemcpyAsync(image_slot,
                                  pixels ? static_cast<const void*>(batch.pixels) : batch.images,
                                  image_bytes_ * batch.size, cudaMemcpyHostToDevice, copy));
  RDDP_CUDA_CHECK(cudaMemcpyAsync(labels_[index].get(), batch.labels,
                                  static_cast<size_t>(batch.size) * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, copy));
  RDDP_CUDA_CHECK(cudaEventRecord(copied_[index].get(), copy));
  RDDP_CUDA_CHECK(cudaStreamWaitEvent(compute, copied_[index].get(), 0));
  return slot;
}

void BatchUpload::release(const Slot& slot, cudaStream_t compute) {
  RDDP_CUDA_CHECK(cudaEventRecord(released_[slot.index].get(), compute));
}

void BatchUpload::wait_until_read(const Slot& slot) const {
  RDDP_CUDA_CHECK(cudaEventSynchronize(copied_[slot.index].get()));
}

}  // namespace rddp::cuda
