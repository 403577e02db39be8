#pragma once
// A record of what the reducer did and when: each gradient as it became ready, each bucket's
// launch (and the gradient that completed it) and each bucket's completion. Tests use it to
// show that buckets are launched in order while backward is still running; a profiling run
// can print it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rddp::ddp {

struct TimelineEvent {
  enum class Kind { grad_ready, bucket_launched, bucket_done };
  Kind kind = Kind::grad_ready;
  int64_t step = 0;
  int bucket = -1;
  std::string tensor;   // grad_ready: the tensor; bucket_launched: the one that completed it
  double seconds = 0;   // since the timeline was made
  // bucket_launched: the bytes each rank hands the allreduce (its element count times the size
  // of the type it travels as), so a run can add up what a step sends.
  size_t bytes = 0;
};

class Timeline {
 public:
  Timeline() : start_(std::chrono::steady_clock::now()) {}

  void record(TimelineEvent::Kind kind, int64_t step, int bucket, const std::string& tensor = {},
              size_t bytes = 0);
  // The allreduce bytes of every bucket launched at `step`.
  size_t bytes_launched(int64_t step) const;
  const std::vector<TimelineEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

  // One line per event: "step 2  0.0123 s  bucket 1 launched after layer3.0.conv1.weight".
  std::string format() const;

 private:
  std::chrono::steady_clock::time_point start_;
  std::vector<TimelineEvent> events_;
};

}  // namespace rddp::ddp
