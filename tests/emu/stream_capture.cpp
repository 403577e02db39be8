// Streams, events and CUDA graphs for the emulator. Streams are synchronous: work runs when it
// is enqueued, so events are always complete and waiting on them returns at once. Capture is
// what the engine needs of it: one stream captured at a time (cudaStreamCaptureModeThreadLocal),
// its work recorded in order, and a graph that replays that list. Recorded kernel launches keep
// their argument values and copies keep their pointers, as a graph's nodes do; replays read
// host memory as it is at replay time, as a graph's copy from pinned memory does.
#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "capture_state.h"
#include "stream_work.h"

// The runtime's opaque handle types, defined here since the emulator owns them.
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point recorded;
};

namespace emu {

namespace {

struct Capture {
  cudaStream_t stream = nullptr;
  CUgraph_st* graph = nullptr;  // non-null while capturing
  bool invalidated = false;
};

Capture& capture() {
  static Capture c;
  return c;
}

bool legacy(cudaStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }

std::set<cudaEvent_t>& events() {
  static std::set<cudaEvent_t> e;
  return e;
}

}  // namespace

namespace detail {

cudaError_t refuse_during_capture() {
  Capture& c = capture();
  if (c.graph == nullptr) return cudaSuccess;
  c.invalidated = true;
  set_last_error(cudaErrorStreamCaptureUnsupported);
  return cudaErrorStreamCaptureUnsupported;
}

bool is_capturing(cudaStream_t stream) {
  return capture().graph != nullptr && capture().stream == stream;
}

}  // namespace detail

void enqueue(cudaStream_t stream, std::function<void()> work) {
  Capture& c = capture();
  if (c.graph != nullptr && stream == c.stream) {
    c.graph->work.push_back(std::move(work));
    return;
  }
  // The legacy default stream synchronises with every stream, the captured one included: the
  // GPU refuses it during a capture and spoils the capture.
  if (c.graph != nullptr && legacy(stream)) {
    c.invalidated = true;
    detail::set_last_error(cudaErrorStreamCaptureImplicit);
    return;
  }
  work();
}

}  // namespace emu

using emu::capture;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  auto& c = capture();
  if (c.graph != nullptr || emu::legacy(stream)) return cudaErrorIllegalState;
  if (mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeGlobal &&
      mode != cudaStreamCaptureModeRelaxed)
    return cudaErrorInvalidValue;
  c.stream = stream;
  c.graph = new CUgraph_st;
  c.invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto& c = capture();
  if (graph == nullptr) return cudaErrorInvalidValue;
  if (c.graph == nullptr || c.stream != stream) return cudaErrorIllegalState;
  CUgraph_st* made = c.graph;
  c.graph = nullptr;
  c.stream = nullptr;
  if (c.invalidated) {
    delete made;
    *graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = made;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return cudaErrorInvalidValue;
  *status = emu::detail::is_capturing(stream) ? cudaStreamCaptureStatusActive
                                              : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  if (exec == nullptr || graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (emu::detail::is_capturing(stream)) return cudaErrorStreamCaptureUnsupported;
  for (const auto& work : exec->work) work();
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return cudaErrorInvalidValue;
  // The nodes themselves are never asked for; their number is.
  if (nodes != nullptr) return cudaErrorNotSupported;
  *count = graph->work.size();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return cudaErrorInvalidValue;
  *event = new CUevent_st{std::chrono::steady_clock::now()};
  emu::events().insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (emu::events().erase(event) == 0) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (emu::events().count(event) == 0) return cudaErrorInvalidResourceHandle;
  // Recorded during a capture, an event only orders work inside the graph; it is never waited
  // on from the host (that would be refused below).
  if (!emu::detail::is_capturing(stream)) event->recorded = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (emu::events().count(event) == 0) return cudaErrorInvalidResourceHandle;
  if (const cudaError_t refused = emu::detail::refuse_during_capture()) return refused;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return cudaEventQuery(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || emu::events().count(start) == 0 || emu::events().count(end) == 0)
    return cudaErrorInvalidResourceHandle;
  *ms = std::chrono::duration<float, std::milli>(end->recorded - start->recorded).count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t /*stream*/, cudaEvent_t event, unsigned int /*flags*/) {
  // Work before the event has run already.
  return emu::events().count(event) != 0 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

}  // extern "C"
