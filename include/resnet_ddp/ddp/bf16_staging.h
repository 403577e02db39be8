#pragma once
// The bfloat16 buffers of --grad-allreduce bf16 and the casts in and out of them, on the
// engine's memory: one slice per bucket of a single allocation made when the reducer is built
// (no allocation while training), so buckets in flight never share bits. On the CPU the casts
// are host loops (bf16_gradients.h); on a GPU they are kernels enqueued on the engine's
// compute stream (include/resnet_ddp/cuda/bf16_cast.h), which the NCCL comm stream waits for
// before each allreduce.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "resnet_ddp/ddp/bucket_plan.h"
#include "resnet_ddp/engine.h"

namespace rddp::ddp {

class Bf16Staging {
 public:
  virtual ~Bf16Staging() = default;
  // Bucket `bucket`'s bfloat16 elements, as many as its gradient slice.
  virtual uint16_t* buffer(int bucket) = 0;
  // buffer(bucket) = bf16(bf16(grads of the bucket) * share).
  virtual void compress(int bucket, float share) = 0;
  // grads of the bucket = float(buffer(bucket)). Call once the allreduce is complete (CPU) or
  // waited for (GPU: the compute stream is ordered after it).
  virtual void decompress(int bucket) = 0;
};

// For the engine's memory; `engine` must outlive it.
std::unique_ptr<Bf16Staging> make_bf16_staging(Engine& engine, const BucketPlan& plan);

}  // namespace rddp::ddp
