#include "resnet_ddp/data/host_allocator.h"

#include <cstdlib>

#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

// Page alignment: whole pages can later be registered with the CUDA driver, and rows of a
// batch never share a cache line with another buffer.
constexpr size_t kAlignment = 4096;

class PlainAllocator final : public HostAllocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* pointer = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (!pointer) fail("out of host memory allocating ", bytes, " bytes of batch buffers: use "
                       "smaller batches or fewer workers");
    return pointer;
  }
  void deallocate(void* pointer) noexcept override { std::free(pointer); }
  std::string description() const override { return "plain"; }
};

}  // namespace

std::shared_ptr<HostAllocator> make_plain_allocator() {
  return std::make_shared<PlainAllocator>();
}

}  // namespace rddp::data
