#pragma once
// Named ranges on a profiler's timeline, so that Nsight Systems shows where a step's time goes:
// NVTX ranges in the domain "resnet_ddp". nsys draws them on each thread's row and projects them
// onto the GPU work launched inside them. Without a profiler attached a range costs a call
// through a pointer to a function that does nothing, so they stay in release builds. The names
// and their nesting are listed in docs/performance.md (Profiling a run).
#include <cstdint>
#include <string>

namespace rddp {

// A range that ends when the object does; ranges on one thread nest.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name);
  explicit ProfileRange(const std::string& name) : ProfileRange(name.c_str()) {}
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

// A range that need not nest with the others (it may span epochs): the steps of a profiler
// capture. start_profile_span returns its id for end_profile_span.
uint64_t start_profile_span(const std::string& name);
void end_profile_span(uint64_t id);

}  // namespace rddp
