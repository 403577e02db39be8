#pragma once
// Runs code that must not hang (a read of a FIFO, a loader stuck in a read) on a thread of its
// own and waits a bounded time for it. A hang fails the test and ends the program: a thread
// blocked in the kernel cannot be stopped any other way, and a test program that hangs would
// only fail at CTest's timeout, minutes later. Exceptions reach the caller.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace rddp::testing {

template <typename Work>
void finishes_within(double seconds, const char* what, Work work) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([done, &work] {
    try {
      work();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (finished.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not finish within %.0f s (it hangs)\n", what, seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  finished.get();
}

}  // namespace rddp::testing
