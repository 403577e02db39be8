#pragma once
// The executor's device memory: every buffer of a step in one allocation, laid out by
// plan_lifetimes (lifetime_plan.h) from the operations that use each, so that buffers never in
// use at the same time share bytes.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/lifetime_plan.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

class LifetimeArena {
 public:
  // Slices start on 256-byte boundaries, the alignment cudaMalloc itself gives, which cuDNN,
  // cuBLAS and vectorised kernels expect.
  static constexpr size_t kAlignBytes = 256;

  // A buffer of `count` elements, which allocate() points `*pointer` at. Its lifetime comes from
  // use() calls naming the same pointer.
  template <typename T>
  void request(T** pointer, size_t count) {
    RDDP_ASSERT(index_.count(pointer) == 0);
    index_[pointer] = requests_.size();
    requests_.push_back({count * sizeof(T), {binder(pointer)}});
  }

  // `pointer` names the same buffer as `with`, requested before: allocate() points both at it,
  // and the uses of either make its one lifetime. For a tensor whose updates go in place into
  // another's bytes, as the gradient flowing through a residual block's identity branch does.
  template <typename T>
  void share(T** pointer, T** with) {
    RDDP_ASSERT(index_.count(pointer) == 0);
    const auto found = index_.find(static_cast<const void*>(with));
    RDDP_ASSERT(found != index_.end());
    index_[pointer] = found->second;
    requests_[found->second].bind.push_back(binder(pointer));
  }

  // Operation `op` of a step reads or writes the buffer requested for `pointer`; operations are
  // numbered in the order they run. A pointer never requested (a buffer this plan does not have)
  // is ignored.
  template <typename T>
  void use(T* const* pointer, int op) {
    const auto found = index_.find(static_cast<const void*>(pointer));
    if (found == index_.end()) return;
    auto [it, fresh] = lifetimes_.try_emplace(found->second, Lifetime{op, op});
    if (!fresh) {
      it->second.first = std::min(it->second.first, op);
      it->second.last = std::max(it->second.last, op);
    }
  }
  // Forgets every use, so that a new walk of the step can record them again.
  void clear_uses() { lifetimes_.clear(); }

  // Plans every buffer requested so far by its uses (each must have one), frees what was
  // allocated before, allocates the plan zero-filled on `stream` (and waits for it), and points
  // every requested pointer at its slice. May be called again after more requests.
  void allocate(cudaStream_t stream) {
    std::vector<BufferLife> lives(requests_.size());
    for (size_t i = 0; i < requests_.size(); ++i) {
      const auto found = lifetimes_.find(i);
      if (found == lifetimes_.end())
        fail("internal error: a buffer of the CUDA executor is used by no operation; please "
             "report this");
      lives[i] = {requests_[i].bytes, found->second};
    }
    const LifetimePlan plan = plan_lifetimes(lives, kAlignBytes);
    buffer_ = DeviceBuffer<std::byte>();  // the old allocation goes before the new one comes
    buffer_ = DeviceBuffer<std::byte>(plan.bytes);
    if (plan.bytes > 0) {
      RDDP_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, plan.bytes, stream));
      RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    for (size_t i = 0; i < requests_.size(); ++i)
      for (const auto& bind : requests_[i].bind) bind(buffer_.get() + plan.offsets[i]);
  }

  size_t bytes() const { return buffer_.bytes(); }
  // The allocation's start, after allocate().
  std::byte* data() const { return buffer_.get(); }

 private:
  // Points `pointer` at the bytes allocate() gives its buffer.
  template <typename T>
  static std::function<void(std::byte*)> binder(T** pointer) {
    return [pointer](std::byte* at) { *pointer = reinterpret_cast<T*>(at); };
  }

  struct Request {
    size_t bytes;
    std::vector<std::function<void(std::byte*)>> bind;  // the requesting pointer's, then sharers'
  };
  std::vector<Request> requests_;
  std::map<const void*, size_t> index_;  // the requested pointer's address -> its request
  std::map<size_t, Lifetime> lifetimes_;  // request -> the operations that use it
  DeviceBuffer<std::byte> buffer_;
};

}  // namespace rddp::cuda
