#pragma once
// How emulated GPU work reaches a stream: the runtime's async copies and sets, kernel launches
// and the library stand-ins (tests/emu/engine/) all go through enqueue, so that a stream being
// captured into a CUDA graph records the work instead of doing it, as on the GPU.
#include <cuda_runtime_api.h>

#include <cstddef>
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
