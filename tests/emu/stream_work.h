#pragma once
// How emulated GPU work reaches a stream: the runtime's async copies and sets, kernel launches
// and the library stand-ins (tests/emu/engine/) all go through enqueue, so that a stream being
// captured into a CUDA graph records the work instead of doing it, as on the GPU.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace emu {

// Runs `work` now (streams are synchronous here), or records it into the graph being captured
// on `stream`. `work` must hold copies of everything it reads at call time but device memory.
void enqueue(cudaStream_t stream, std::function<void()> work);

// Work that other processes complete: an emulated NCCL collective, in flight until every rank
// has joined it. test() says without blocking whether it has completed (or was aborted, which
// ends it too); any thread may call it.
class AsyncWork {
 public:
  virtual ~AsyncWork() = default;
  virtual bool test() = 0;

  // test(), and the first time it says so, when: the emulator's waits poll through this, so that
  // an event recorded behind the work can be timed at the work's end, as on the GPU.
  bool done() {
    if (completed_ns_.load() != 0) return true;
    if (!test()) return false;
    int64_t unset = 0;
    completed_ns_.compare_exchange_strong(unset, now_ns());
    return true;
  }
  // When done() first said so; valid once it has.
  std::chrono::steady_clock::time_point completed_at() const {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(completed_ns_.load()));
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::atomic<int64_t> completed_ns_{0};
};

// Starts `start`'s work on `stream` once the stream's earlier work is complete, and keeps it in
// flight there: an event recorded on the stream afterwards is not complete, and waiting on the
// stream or on such an event blocks, until the work's test() says so. Work enqueued on the
// stream later waits for it first. On a stream being captured it is recorded instead, as a node
// that starts the work and waits for it when the graph is replayed.
cudaError_t enqueue_async(cudaStream_t stream, const std::function<std::shared_ptr<AsyncWork>()>& start);

// Whether [p, p + bytes) lies inside one allocation of the emulated cudaMalloc.
bool is_device_memory(const void* p, size_t bytes);

}  // namespace emu
