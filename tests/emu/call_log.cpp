#include "call_log.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace emu {

namespace {

class CallLog {
 public:
  CallLog() {
    if (const char* path = std::getenv("RDDP_EMU_CALL_LOG"); path != nullptr) path_ = path;
  }
  // At exit: the counts of the whole run.
  ~CallLog() {
    if (path_.empty()) return;
    std::FILE* file = std::fopen(path_.c_str(), "w");
    if (file == nullptr) {
      std::fprintf(stderr, "emulated CUDA: cannot write the call log %s\n", path_.c_str());
      return;
    }
    for (const auto& [what, count] : counts_) std::fprintf(file, "%lld %s\n", count, what.c_str());
    std::fclose(file);
  }

  bool enabled() const { return !path_.empty(); }
  void add(const std::string& what) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[what];
  }

 private:
  std::string path_;
  std::mutex mutex_;
  std::map<std::string, long long> counts_;
};

CallLog& call_log() {
  static CallLog log;
  return log;
}

// Made at start, so that a run that asks the GPU for nothing still writes its (empty) log.
const CallLog& made_at_start = call_log();

}  // namespace

bool logging_calls() { return call_log().enabled(); }

void log_call(const std::string& what) {
  if (logging_calls()) call_log().add(what);
}

}  // namespace emu
