#pragma once
// No hangs: a thread that watches every collective the communicators start and, when one has
// not completed within the timeout (a rank died or hangs, the network broke) or a library
// reports an asynchronous error, hands a message to its failure handler, by default
// fatal_abort(), which aborts the communicators and ends the job with MPI_Abort. The message
// names the operation: "allreduce of bucket 3 at step 120 did not complete in 600 s: ...".
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rddp::ddp {

class CommRequest;

class Watchdog {
 public:
  using FailureHandler = std::function<void(const std::string& message)>;
  using ErrorSource = std::function<std::string()>;  // "" while all is well

  // Starts the watching thread. `timeout` must be positive (the CLI's --comm-timeout, default
  // 600 s). An empty handler means fatal_abort. The handler runs on the watching thread, at
  // most once; the watchdog stops watching after it returns.
  explicit Watchdog(std::chrono::milliseconds timeout, FailureHandler on_failure = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  std::chrono::milliseconds timeout() const { return timeout_; }

  // Watches `request` from now until observed_complete() says it is done.
  void watch(const std::string& what, std::shared_ptr<const CommRequest> request);
  // Polled at every tick; returns an id for remove_error_source(), which waits for a poll in
  // progress, so the source may be destroyed after it returns.
  int add_error_source(ErrorSource source);
  void remove_error_source(int id);

  // The message for an operation that outlived the timeout.
  static std::string timeout_message(const std::string& what, std::chrono::milliseconds timeout);

 private:
  struct Watched {
    std::string what;
    std::chrono::steady_clock::time_point start;
    std::shared_ptr<const CommRequest> request;
  };
  void run();
  std::string check_once();  // the failure message, or ""

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds tick_;
  FailureHandler on_failure_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool finished_ = false;  // after a failure nothing more is watched
  std::vector<Watched> watched_;
  std::vector<std::pair<int, ErrorSource>> error_sources_;
  int next_source_id_ = 0;
  std::thread thread_;
};

}  // namespace rddp::ddp
