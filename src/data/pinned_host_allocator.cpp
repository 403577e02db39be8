#include <cuda_runtime_api.h>

#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

class PinnedAllocator final : public HostAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* pointer = nullptr;
    const cudaError_t status = cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
    if (status != cudaSuccess)
      fail("cudaHostAlloc of ", bytes, " bytes of pinned batch buffers failed: ",
           cudaGetErrorString(status), ". Use smaller batches or fewer loader workers");
    return pointer;
  }
  void deallocate(void* pointer) noexcept override { cudaFreeHost(pointer); }
  std::string description() const override { return "pinned (cudaHostAlloc)"; }
};

// What the plain allocator gives, with the reason pinned memory was not used.
class FallbackAllocator final : public HostAllocator {
 public:
  explicit FallbackAllocator(std::string why) : plain_(make_plain_allocator()), why_(std::move(why)) {}
  void* allocate(size_t bytes) override { return plain_->allocate(bytes); }
  void deallocate(void* pointer) noexcept override { plain_->deallocate(pointer); }
  std::string description() const override { return "plain (no pinned memory: " + why_ + ")"; }

 private:
  std::shared_ptr<HostAllocator> plain_;
  std::string why_;
};

}  // namespace

std::shared_ptr<HostAllocator> make_pinned_allocator() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    const std::string why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device";
    cudaGetLastError();  // leave no error behind for the next CUDA call to trip on
    return std::make_shared<FallbackAllocator>(why);
  }
  return std::make_shared<PinnedAllocator>();
}

}  // namespace rddp::data
