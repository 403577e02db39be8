// The bfloat16 staging slices of the gradient buckets, on host or device memory.
#include "resnet_ddp/ddp/bf16_staging.h"

#include <vector>

#include "resnet_ddp/cuda/bf16_cast.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/ddp/bf16_gradients.h"

namespace rddp::ddp {

namespace {

// Where each bucket's slice begins: the buckets tile the gradient buffer, so the staging buffer
// is as long as the gradient buffer and a bucket's slice sits at its gradients' own offset.
class Bf16StagingBase : public Bf16Staging {
 protected:
  Bf16StagingBase(Engine& engine, const BucketPlan& plan) : engine_(engine), plan_(plan) {}
  size_t elements() const { return plan_.buckets.empty() ? 0 : plan_.buckets.back().end; }
  size_t begin(int bucket) const { return plan_.buckets[static_cast<size_t>(bucket)].begin; }
  size_t count(int bucket) const {
    const Bucket& slice = plan_.buckets[static_cast<size_t>(bucket)];
    return slice.end - slice.begin;
  }
  float* grads(int bucket) const { return engine_.grads() + begin(bucket); }

  Engine& engine_;
  BucketPlan plan_;
};

class HostBf16Staging final : public Bf16StagingBase {
 public:
  HostBf16Staging(Engine& engine, const BucketPlan& plan) : Bf16StagingBase(engine, plan), bits_(elements()) {}
  uint16_t* buffer(int bucket) override { return bits_.data() + begin(bucket); }
  void compress(int bucket, float share) override { compress_bf16(grads(bucket), buffer(bucket), count(bucket), share); }
  void decompress(int bucket) override { decompress_bf16(buffer(bucket), grads(bucket), count(bucket)); }

 private:
  std::vector<uint16_t> bits_;
};

// The casts go on the compute stream: compress() right after the bucket's last gradient was
// enqueued there, so the comm stream's wait (NcclComm::after_compute) covers it; decompress()
// after the compute stream was made to wait for the allreduce, so the optimizer reads the
// widened values.
class DeviceBf16Staging final : public Bf16StagingBase {
 public:
  DeviceBf16Staging(Engine& engine, const BucketPlan& plan)
      : Bf16StagingBase(engine, plan),
        bits_(elements()),
        stream_(static_cast<cudaStream_t>(engine.compute_stream())) {}
  uint16_t* buffer(int bucket) override { return bits_.get() + begin(bucket); }
  void compress(int bucket, float share) override {
    cuda::compress_bf16(grads(bucket), buffer(bucket), count(bucket), share, stream_);
  }
  void decompress(int bucket) override { cuda::decompress_bf16(buffer(bucket), grads(bucket), count(bucket), stream_); }

 private:
  cuda::DeviceBuffer<uint16_t> bits_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Bf16Staging> make_bf16_staging(Engine& engine, const BucketPlan& plan) {
  if (engine.device() == DeviceKind::cpu) return std::make_unique<HostBf16Staging>(engine, plan);
  return std::make_unique<DeviceBf16Staging>(engine, plan);
}

}  // namespace rddp::ddp
