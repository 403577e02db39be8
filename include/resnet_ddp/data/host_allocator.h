#pragma once
// Where the loader's batch buffers come from. The CUDA executor wants page-locked (pinned)
// memory, so that its host-to-device copies run asynchronously at full speed; the CPU
// executor wants plain memory.
#include <cstddef>
#include <memory>
#include <string>

namespace rddp::data {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // Throws Error when the memory cannot be had. The result is aligned to 64 bytes at least.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* pointer) noexcept = 0;
  // For the settings table: "plain", "pinned (cudaHostAlloc)"...
  virtual std::string description() const = 0;
};

std::shared_ptr<HostAllocator> make_plain_allocator();
// cudaHostAlloc'd memory; plain memory when no CUDA device answers (description() says so),
// so that the same code runs on machines without a GPU.
std::shared_ptr<HostAllocator> make_pinned_allocator();

}  // namespace rddp::data
