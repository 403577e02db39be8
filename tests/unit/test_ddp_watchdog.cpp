// The watchdog over fake operations: timeouts, completions and asynchronous errors.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using namespace rddp::ddp;
using namespace std::chrono_literals;

namespace {

// An operation that completes when the test says so.
class FakeRequest final : public CommRequest {
 public:
  std::atomic<bool> complete{false};
  bool test() override { return complete.load(); }
  void wait() override {}
  void synchronize() override {}
  bool observed_complete() const override { return complete.load(); }
};

// Collects what the watchdog reports, so a test can wait for it with a bound.
class Reports {
 public:
  Watchdog::FailureHandler handler() {
    return [this](const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(message);
      changed_.notify_all();
    };
  }
  bool wait_for_one(std::chrono::milliseconds bound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, bound, [this] { return !messages_.empty(); });
  }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> messages_;
};

}  // namespace

TEST_CASE("an operation that never completes is reported once, naming it and the timeout") {
  Reports reports;
  const auto start = std::chrono::steady_clock::now();
  Watchdog watchdog(100ms, reports.handler());
  auto stuck = std::make_shared<FakeRequest>();
  watchdog.watch("allreduce of bucket 3 at step 120", stuck);
  REQUIRE(reports.wait_for_one(5s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 100ms);
  std::this_thread::sleep_for(200ms);  // no second report
  const auto messages = reports.messages();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0] ==
        "allreduce of bucket 3 at step 120 did not complete in 0.1 s: a rank died or hangs, or the "
        "network failed. Look for the first error among the ranks' messages; if a step can "
        "legitimately take this long, raise --comm-timeout");
}

TEST_CASE("operations that complete in time are not reported") {
  Reports reports;
  Watchdog watchdog(150ms, reports.handler());
  for (int i = 0; i < 5; ++i) {
    auto request = std::make_shared<FakeRequest>();
    watchdog.watch("allreduce of bucket " + std::to_string(i), request);
    std::this_thread::sleep_for(50ms);
    request->complete = true;
  }
  CHECK_FALSE(reports.wait_for_one(400ms));
}

TEST_CASE("the oldest of several late operations is the one reported") {
  Reports reports;
  Watchdog watchdog(100ms, reports.handler());
  auto first = std::make_shared<FakeRequest>(), second = std::make_shared<FakeRequest>();
  watchdog.watch("allreduce of bucket 0 at step 7", first);
  watchdog.watch("allreduce of bucket 1 at step 7", second);
  REQUIRE(reports.wait_for_one(5s));
  CHECK(reports.messages()[0].rfind("allreduce of bucket 0 at step 7 did not complete", 0) == 0);
}

TEST_CASE("an asynchronous error is reported as soon as a source returns it") {
  Reports reports;
  Watchdog watchdog(60s, reports.handler());
  std::atomic<bool> broken{false};
  std::atomic<bool> removed_source_polled{false};
  const int removed = watchdog.add_error_source([&] {
    removed_source_polled = true;
    return std::string("must not be reported");
  });
  watchdog.remove_error_source(removed);
  removed_source_polled = false;
  watchdog.add_error_source([&] { return broken ? std::string("NCCL reported an asynchronous error") : std::string(); });
  CHECK_FALSE(reports.wait_for_one(300ms));
  broken = true;
  REQUIRE(reports.wait_for_one(10s));
  CHECK(reports.messages()[0] == "NCCL reported an asynchronous error");
  CHECK_FALSE(removed_source_polled);
}

TEST_CASE("a timeout that is not positive is refused naming the flag") {
  CHECK_THROWS_WITH_AS(Watchdog(0ms), doctest::Contains("--comm-timeout"), Error);
  CHECK_THROWS_WITH_AS(Watchdog(-5s), doctest::Contains("--comm-timeout"), Error);
  CHECK(Watchdog::timeout_message("broadcast of x", 600s).rfind("broadcast of x did not complete in 600 s: ", 0) == 0);
}
