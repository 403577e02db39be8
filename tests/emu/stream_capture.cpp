// Streams, events and CUDA graphs for the emulator. Streams are synchronous: work runs when it
// is enqueued, so events are complete at once and waiting on them returns at once, except
// behind asynchronous work (an emulated collective), which keeps an event recorded after it
// incomplete until the other processes have joined. Capture is what the engine needs of it, in
// cudaStreamCaptureModeThreadLocal: one capture at a time, begun on one stream (the origin);
// another stream joins it by waiting on an event recorded in it, as the comm stream does when
// a collective follows the compute stream's work, and must be joined back (the origin, or a
// stream that is, waits on an event recorded after its last work) before the capture ends, or
// the capture fails with cudaErrorStreamCaptureUnjoined. The work of every captured stream is
// recorded in the order it was enqueued, which respects every dependency since streams are
// synchronous, and a graph replays that list. Recorded kernel launches keep their argument
// values and copies keep their pointers, as a graph's nodes do; replays read host memory as it
// is at replay time, as a graph's copy from pinned memory does; a recorded collective, on
// replay, starts and is waited for in its place.
//
// A graph that holds a collective replays on a thread of its own, as asynchronous work on the
// launch stream: cudaGraphLaunch returns at once, as on the GPU, and an event recorded after
// it stays incomplete until the replay's last node has run, so that a watchdog can see a
// replay that hangs on a rank that never joins. Device work runs one piece at a time under one
// lock (hold_device), whichever thread runs it; the engine's events order it as on the GPU. A
// graph without collectives replays at once on the caller's thread: nothing could tell.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "call_log.h"
#include "capture_state.h"
#include "host_waits.h"
#include "stream_work.h"

namespace emu {

// A recorded node: device work (run), or work that other processes complete (start), started
// when the replay reaches it and waited for before the next node.
struct GraphNode {
  std::function<void()> run;
  std::function<std::shared_ptr<AsyncWork>()> start;
};

using GraphNodes = std::vector<GraphNode>;

}  // namespace emu

// The runtime's opaque handle types, defined here since the emulator owns them.
struct CUgraph_st {
  emu::GraphNodes nodes;
};
struct CUgraphExec_st {
  // Shared with the replays in flight, which may outlive the executable graph.
  std::shared_ptr<const emu::GraphNodes> nodes;
  bool has_collectives;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point recorded;
  bool ever_recorded = false;  // outside a capture, or by a replay: something to time
  std::vector<std::shared_ptr<emu::AsyncWork>> behind;  // in flight on its stream when recorded
  // Last recorded inside a capture (the capture's number, 0 if not): on this stream, after
  // `captured_nodes` of its recorded nodes.
  unsigned captured_in = 0;
  cudaStream_t captured_stream = nullptr;
  size_t captured_nodes = 0;
};

namespace emu {

namespace {

struct Capture {
  cudaStream_t origin = nullptr;
  CUgraph_st* graph = nullptr;  // non-null while capturing
  bool invalidated = false;
  unsigned number = 0;  // of the capture in progress or the last one
  std::thread::id thread;  // that began it: ThreadLocal mode refuses unsafe calls from it alone
  // Every stream in the capture: how many nodes it recorded, and how many of them a wait by
  // another captured stream covers (joined back when the two are equal).
  struct Member {
    size_t nodes = 0, joined = 0;
  };
  std::map<cudaStream_t, Member> streams;
};

// The capture's state is the capturing thread's to change; other threads (a watchdog querying
// events) read whether one is in progress under this lock.
std::mutex& capture_mutex() {
  static std::mutex m;
  return m;
}

Capture& capture() {
  static Capture c;
  return c;
}

bool legacy(cudaStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }

using AsyncList = std::vector<std::shared_ptr<AsyncWork>>;

// Guards the event registry, the events' lists and the streams' work in flight: a watchdog
// thread queries events while the owner records them. Never held while waiting.
std::mutex& async_mutex() {
  static std::mutex m;
  return m;
}

std::set<cudaEvent_t>& events() {
  static std::set<cudaEvent_t> e;
  return e;
}

bool known_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(async_mutex());
  return events().count(event) != 0;
}

std::map<cudaStream_t, AsyncList>& in_flight() {
  static std::map<cudaStream_t, AsyncList> works;
  return works;
}

// What a wait on `stream` covers: the work in flight on it, or on every stream for the legacy
// default stream, which synchronises with all of them. `take` removes it from in_flight(), for a
// wait that completes it. The caller holds async_mutex().
AsyncList in_flight_behind(cudaStream_t stream, bool take) {
  auto& all = in_flight();
  AsyncList works;
  for (auto it = all.begin(); it != all.end();) {
    if (legacy(stream) || it->first == stream) {
      works.insert(works.end(), it->second.begin(), it->second.end());
      if (take) {
        it = all.erase(it);
        continue;
      }
    }
    ++it;
  }
  return works;
}

bool all_complete(const AsyncList& works) {
  for (const auto& work : works)
    if (!work->done()) return false;
  return true;
}

void wait_for(const AsyncList& works) {
  for (const auto& work : works)
    while (!work->done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

AsyncList behind_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(async_mutex());
  return event->behind;
}

bool ever_recorded(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(async_mutex());
  return event->ever_recorded;
}

// When the event completed: when it was recorded, or when the last work it was recorded behind
// ended, if later. Only for an event whose work is all complete.
std::chrono::steady_clock::time_point completed_at(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(async_mutex());
  std::chrono::steady_clock::time_point at = event->recorded;
  for (const auto& work : event->behind) at = std::max(at, work->completed_at());
  return at;
}

// Set on a replay's own thread: work it enqueues (a recorded node that enqueues more) is part
// of the replay and runs at once, not behind the replay in flight on the stream.
thread_local bool replaying = false;

}  // namespace

namespace detail {

std::unique_lock<std::recursive_mutex> hold_device() {
  static std::recursive_mutex device;
  return std::unique_lock<std::recursive_mutex>(device);
}

cudaError_t refuse_during_capture() {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (c.graph == nullptr || std::this_thread::get_id() != c.thread) return cudaSuccess;
  c.invalidated = true;
  set_last_error(cudaErrorStreamCaptureUnsupported);
  return cudaErrorStreamCaptureUnsupported;
}

bool is_capturing(cudaStream_t stream) {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(capture_mutex());
  return c.graph != nullptr && c.streams.count(stream) != 0;
}

void finish_stream(cudaStream_t stream) {
  AsyncList works;
  {
    std::lock_guard<std::mutex> lock(async_mutex());
    works = in_flight_behind(stream, /*take=*/true);
  }
  wait_for(works);
}

}  // namespace detail

namespace {

// Records `node` if `stream` is captured; refuses the legacy stream during a capture, since it
// synchronises with every stream, the captured ones included (the GPU refuses it and spoils
// the capture). Returns whether the caller is done with the work.
bool record_if_captured(cudaStream_t stream, GraphNode& node) {
  Capture& c = capture();
  if (c.graph == nullptr) return false;
  const auto member = c.streams.find(stream);
  if (member != c.streams.end()) {
    c.graph->nodes.push_back(std::move(node));
    ++member->second.nodes;
    return true;
  }
  if (legacy(stream)) {
    c.invalidated = true;
    detail::set_last_error(cudaErrorStreamCaptureImplicit);
    return true;
  }
  return false;
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  if (replaying) {
    const auto device = detail::hold_device();
    work();
    return;
  }
  GraphNode node{std::move(work), nullptr};
  if (record_if_captured(stream, node)) return;
  detail::finish_stream(stream);  // never while holding the device: a replay may need it
  const auto device = detail::hold_device();
  node.run();
}

cudaError_t enqueue_async(cudaStream_t stream, const std::function<std::shared_ptr<AsyncWork>()>& start) {
  // Captured, the work is a node that starts it and waits for it on replay: the graph's later
  // nodes may depend on it, and replays run their nodes in order.
  GraphNode node{nullptr, start};
  const bool refused = capture().graph != nullptr && legacy(stream);
  if (record_if_captured(stream, node)) return refused ? cudaErrorStreamCaptureImplicit : cudaSuccess;
  detail::finish_stream(stream);
  std::shared_ptr<AsyncWork> work = start();
  std::lock_guard<std::mutex> lock(async_mutex());
  in_flight()[stream].push_back(std::move(work));
  return cudaSuccess;
}

namespace {

// A graph's nodes in order on the calling thread, the device held for each node's work but not
// while a collective is waited for (the host, a replay elsewhere, may need it meanwhile).
void run_nodes(const GraphNodes& nodes) {
  for (const GraphNode& node : nodes) {
    if (node.start) {
      std::shared_ptr<AsyncWork> work;
      {
        const auto device = detail::hold_device();
        work = node.start();
      }
      wait_for({work});
    } else {
      const auto device = detail::hold_device();
      node.run();
    }
  }
}

// One replay of a graph with collectives, on its own thread; complete when its last node has
// run. The thread owns what it reads, so the replay may outlive the executable graph.
class Replay final : public AsyncWork {
 public:
  explicit Replay(std::shared_ptr<const GraphNodes> nodes) {
    std::thread([done = done_, nodes = std::move(nodes)]() mutable {
      replaying = true;
      try {
        run_nodes(*nodes);
      } catch (const std::exception& error) {
        // No caller to hand it to: the host went on after the launch, as on the GPU.
        std::fprintf(stderr, "emulated CUDA: a graph replay failed: %s\n", error.what());
        std::abort();
      }
      nodes.reset();  // before it says so: whoever waited for it may free what the nodes hold
      done->store(true);
    }).detach();
  }

  bool test() override { return done_->load(); }

 private:
  std::shared_ptr<std::atomic<bool>> done_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

}  // namespace emu

using emu::capture;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  auto& c = capture();
  if (c.graph != nullptr || emu::legacy(stream)) return cudaErrorIllegalState;
  if (mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeGlobal &&
      mode != cudaStreamCaptureModeRelaxed)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(emu::capture_mutex());
  c.origin = stream;
  c.graph = new CUgraph_st;
  c.invalidated = false;
  ++c.number;
  c.thread = std::this_thread::get_id();
  c.streams.clear();
  c.streams[stream] = {};
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto& c = capture();
  if (graph == nullptr) return cudaErrorInvalidValue;
  if (c.graph == nullptr || c.origin != stream) return cudaErrorIllegalState;
  bool unjoined = false;
  for (const auto& [member, counts] : c.streams)
    if (member != c.origin && counts.nodes > counts.joined) unjoined = true;
  CUgraph_st* made = nullptr;
  {
    std::lock_guard<std::mutex> lock(emu::capture_mutex());
    made = c.graph;
    c.graph = nullptr;
    c.origin = nullptr;
    c.streams.clear();
  }
  if (c.invalidated || unjoined) {
    delete made;
    *graph = nullptr;
    return c.invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined;
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
  const bool has_collectives = std::any_of(graph->nodes.begin(), graph->nodes.end(),
                                           [](const emu::GraphNode& node) { return node.start != nullptr; });
  *exec = new CUgraphExec_st{std::make_shared<const emu::GraphNodes>(graph->nodes), has_collectives};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (emu::detail::is_capturing(stream)) return cudaErrorStreamCaptureUnsupported;
  emu::log_call("cudaGraphLaunch");
  if (exec->has_collectives)
    return emu::enqueue_async(stream, [nodes = exec->nodes] { return std::make_shared<emu::Replay>(nodes); });
  emu::detail::finish_stream(stream);  // behind the stream's earlier work, as every launch
  emu::run_nodes(*exec->nodes);
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return cudaErrorInvalidValue;
  // The nodes themselves are never asked for; their number is.
  if (nodes != nullptr) return cudaErrorNotSupported;
  *count = graph->nodes.size();
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
  *event = new CUevent_st{std::chrono::steady_clock::now(), false, {}};
  std::lock_guard<std::mutex> lock(emu::async_mutex());
  emu::events().insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  {
    std::lock_guard<std::mutex> lock(emu::async_mutex());
    if (emu::events().erase(event) == 0) return cudaErrorInvalidResourceHandle;
  }
  delete event;
  return cudaSuccess;
}

// With cudaEventRecordExternal on a captured stream, the record is a node of the graph: each
// replay records the event when it reaches the node, behind the graph's earlier nodes, so that
// the host can time or wait for a point inside the graph. Otherwise as cudaEventRecord.
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if ((flags & ~static_cast<unsigned>(cudaEventRecordExternal)) != 0) return cudaErrorInvalidValue;
  if (flags == 0 || !emu::detail::is_capturing(stream)) return cudaEventRecord(event, stream);
  if (!emu::known_event(event)) return cudaErrorInvalidResourceHandle;
  emu::enqueue(stream, [event] {
    std::lock_guard<std::mutex> lock(emu::async_mutex());
    event->captured_in = 0;
    event->recorded = std::chrono::steady_clock::now();
    event->ever_recorded = true;
    event->behind.clear();
  });
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(emu::async_mutex());
  if (emu::events().count(event) == 0) return cudaErrorInvalidResourceHandle;
  // Recorded during a capture, an event only orders work inside the graph: a captured stream
  // that waits on it covers the recording stream's nodes so far.
  if (emu::detail::is_capturing(stream)) {
    event->captured_in = capture().number;
    event->captured_stream = stream;
    event->captured_nodes = capture().streams.at(stream).nodes;
    return cudaSuccess;
  }
  event->captured_in = 0;
  event->recorded = std::chrono::steady_clock::now();
  event->ever_recorded = true;
  event->behind = emu::in_flight_behind(stream, /*take=*/false);
  return cudaSuccess;
}

namespace {

// An event last recorded in the capture in progress: the host cannot wait for it.
bool captured_now(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(emu::capture_mutex());
  return capture().graph != nullptr && event->captured_in == capture().number;
}

}  // namespace

// Any thread: the watchdog asks whether a collective has completed. The capturing thread may not
// (stricter than the GPU, so that a test catches a host poll inside a captured step).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  ++emu::host_waits().polls;
  if (!emu::known_event(event)) return cudaErrorInvalidResourceHandle;
  if (const cudaError_t refused = emu::detail::refuse_during_capture()) return refused;
  if (captured_now(event)) return cudaErrorCapturedEvent;
  return emu::all_complete(emu::behind_event(event)) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  ++emu::host_waits().event_syncs;
  if (!emu::known_event(event)) return cudaErrorInvalidResourceHandle;
  if (const cudaError_t refused = emu::detail::refuse_during_capture()) return refused;
  if (captured_now(event)) return cudaErrorCapturedEvent;
  emu::wait_for(emu::behind_event(event));
  return cudaSuccess;
}

// Between the events' completions, so that an event recorded behind a replay in flight times
// the replay's end, as on the GPU; cudaErrorNotReady while either is incomplete and
// cudaErrorInvalidResourceHandle for one never recorded (only captured, say), as there.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || !emu::known_event(start) || !emu::known_event(end))
    return cudaErrorInvalidResourceHandle;
  if (!emu::ever_recorded(start) || !emu::ever_recorded(end)) return cudaErrorInvalidResourceHandle;
  if (!emu::all_complete(emu::behind_event(start)) || !emu::all_complete(emu::behind_event(end)))
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(emu::completed_at(end) - emu::completed_at(start))
            .count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  if (!emu::known_event(event)) return cudaErrorInvalidResourceHandle;
  auto& c = capture();
  if (captured_now(event)) {
    // Inside the capture: `stream` joins it if it was not in it, and covers the recording
    // stream's nodes up to the event (a fork, or a join back).
    std::lock_guard<std::mutex> lock(emu::capture_mutex());
    auto& recorder = c.streams.at(event->captured_stream);
    if (stream != event->captured_stream)
      recorder.joined = std::max(recorder.joined, event->captured_nodes);
    c.streams.emplace(stream, decltype(c.streams)::mapped_type{});
    return cudaSuccess;
  }
  if (emu::detail::is_capturing(stream)) {
    // A captured stream may not wait on work outside the capture.
    c.invalidated = true;
    emu::detail::set_last_error(cudaErrorStreamCaptureIsolation);
    return cudaErrorStreamCaptureIsolation;
  }
  // Synchronous streams cannot defer their next work behind the event's, so the host waits
  // here for what the event is behind; other work before it has run already.
  emu::wait_for(emu::behind_event(event));
  return cudaSuccess;
}

}  // extern "C"
