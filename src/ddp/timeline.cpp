// The reducer's record of readiness, launches and completions.
#include "resnet_ddp/ddp/timeline.h"

#include <cstdio>

namespace rddp::ddp {

void Timeline::record(TimelineEvent::Kind kind, int64_t step, int bucket, const std::string& tensor,
                      size_t bytes) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  events_.push_back({kind, step, bucket, tensor, seconds, bytes});
}

size_t Timeline::bytes_launched(int64_t step) const {
  size_t total = 0;
  for (const TimelineEvent& event : events_)
    if (event.kind == TimelineEvent::Kind::bucket_launched && event.step == step) total += event.bytes;
  return total;
}

std::string Timeline::format() const {
  std::string text;
  for (const TimelineEvent& event : events_) {
    char head[64];
    std::snprintf(head, sizeof head, "step %lld  %9.6f s  ", static_cast<long long>(event.step),
                  event.seconds);
    text += head;
    switch (event.kind) {
      case TimelineEvent::Kind::grad_ready:
        text += "gradient of " + event.tensor + " ready";
        break;
      case TimelineEvent::Kind::bucket_launched:
        text += "bucket " + std::to_string(event.bucket) + " launched after " + event.tensor + " (" +
                std::to_string(event.bytes) + " bytes)";
        break;
      case TimelineEvent::Kind::bucket_done:
        text += "bucket " + std::to_string(event.bucket) + " done";
        break;
    }
    text += "\n";
  }
  return text;
}

}  // namespace rddp::ddp
