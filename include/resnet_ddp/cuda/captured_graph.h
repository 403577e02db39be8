#pragma once
// One CUDA graph captured from the work a function enqueues on a stream, and replayed.
//
// The capture uses cudaStreamCaptureModeThreadLocal: a call that is unsafe during a capture
// (a synchronisation, cudaMalloc, a query of captured work) made by this thread ends the
// capture with an error, which is what we want to learn about; the loader's threads (pinned
// allocations) and the watchdog's thread (event queries) keep working meanwhile, which the
// Global mode would forbid them. Relaxed would let such a call through silently.
//
// Capturing runs nothing: the captured work runs on the first replay.
#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace rddp::cuda {

class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Captures what `enqueue` puts on `stream` and instantiates it. Returns an empty string on
  // success; otherwise why it failed (the Error `enqueue` threw, or the CUDA error that ended or
  // instantiated the capture), with the stream out of capture mode, the sticky-free error state
  // cleared and no graph kept: the caller may then enqueue the same work eagerly.
  std::string capture(cudaStream_t stream, const std::function<void()>& enqueue);

  bool ready() const { return exec_ != nullptr; }
  // Enqueues one run of the captured work on `stream`.
  void replay(cudaStream_t stream) const;
  // The number of nodes (kernels, copies, memsets...) in the graph, for logs and tests.
  size_t nodes() const;

 private:
  void reset();
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace rddp::cuda
