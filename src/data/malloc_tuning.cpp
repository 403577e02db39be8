#include "resnet_ddp/data/malloc_tuning.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rddp::data {

namespace {

constexpr int kMmapThresholdBytes = 64 << 20;
constexpr int kTrimThresholdBytes = 256 << 20;

std::string tune() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr)
    return "malloc as GLIBC_TUNABLES sets it";
  if (mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) != 1 ||
      mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) != 1)
    return "the allocator's defaults (mallopt refused the thresholds, as a sanitizer's allocator does)";
  return "freed image buffers kept for reuse (malloc mmap threshold 64 MiB, trim 256 MiB)";
#else
  return "the C library's malloc defaults";
#endif
}

}  // namespace

std::string keep_freed_image_memory() {
  static std::once_flag once;
  static std::string in_force;
  std::call_once(once, [] { in_force = tune(); });
  return in_force;
}

}  // namespace rddp::data
