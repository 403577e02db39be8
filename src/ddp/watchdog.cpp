// The watching thread: polls the collectives in flight and the libraries' error reports.
#include "resnet_ddp/ddp/watchdog.h"

#include <algorithm>
#include <cstdio>

#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/error.h"

namespace rddp::ddp {

namespace {

// Often enough that a timeout is reported within a few percent of its value, rarely enough
// that the thread costs nothing: a 600 s timeout is checked every second.
std::chrono::milliseconds tick_for(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 20, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
}

std::string seconds_text(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000);
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", ms / 1000.0);
  return text;
}

}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds timeout, FailureHandler on_failure)
    : timeout_(timeout), tick_(tick_for(timeout)), on_failure_(std::move(on_failure)) {
  if (timeout.count() <= 0)
    fail("--comm-timeout must be a positive number of seconds, got ", seconds_text(timeout));
  if (!on_failure_) on_failure_ = [](const std::string& message) { fatal_abort(message); };
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string Watchdog::timeout_message(const std::string& what, std::chrono::milliseconds timeout) {
  return what + " did not complete in " + seconds_text(timeout) +
         " s: a rank died or hangs, or the network failed. Look for the first error among the "
         "ranks' messages; if a step can legitimately take this long, raise --comm-timeout";
}

void Watchdog::watch(const std::string& what, std::shared_ptr<const CommRequest> request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  watched_.push_back({what, std::chrono::steady_clock::now(), std::move(request)});
}

int Watchdog::add_error_source(ErrorSource source) {
  std::lock_guard<std::mutex> lock(mutex_);
  error_sources_.emplace_back(next_source_id_, std::move(source));
  return next_source_id_++;
}

void Watchdog::remove_error_source(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  error_sources_.erase(std::remove_if(error_sources_.begin(), error_sources_.end(),
                                      [id](const auto& entry) { return entry.first == id; }),
                       error_sources_.end());
}

std::string Watchdog::check_once() {
  // Called with mutex_ held, so that a source being removed is not polled half-destroyed.
  for (const auto& [id, source] : error_sources_) {
    std::string error = source();
    if (!error.empty()) return error;
  }
  const auto now = std::chrono::steady_clock::now();
  watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                [](const Watched& entry) { return entry.request->observed_complete(); }),
                 watched_.end());
  // The oldest operation is reported: the ones after it wait behind it.
  for (const Watched& entry : watched_)
    if (now - entry.start >= timeout_) return timeout_message(entry.what, timeout_);
  return {};
}

void Watchdog::run() {
  std::string failure;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, tick_, [this] { return stopping_; });
      if (stopping_) break;
      try {
        failure = check_once();
      } catch (const std::exception& error) {
        failure = error.what();
      }
      if (!failure.empty()) break;
    }
    finished_ = true;
    watched_.clear();
  }
  // Outside the lock: the default handler never returns, and the others must not block the
  // threads that start operations.
  if (!failure.empty()) on_failure_(failure);
}

}  // namespace rddp::ddp
