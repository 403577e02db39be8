#pragma once
// Where the time of a training step goes, measured on the GPU: the step hooks the engine calls
// at the boundaries of a step (engine.h: before_forward, before_optimizer) record CUDA events on
// the compute stream as the work is enqueued, around the gradient reducer's own hooks when there
// is one, so that the events fall between the parts of the step in stream order:
//
//   begin_step  [wait for the batch's copy]  before_forward: [reducer: rank 0's BatchNorm
//   buffers]  forward, loss, backward  before_optimizer: [reducer: wait for the last gradient
//   buckets]  optimizer  end_step
//
// What the stream spends waiting on the copy stream or the communication stream shows as the
// time between two events, which is exactly what such a wait exposes. The time from one step's
// end to the next one's start is the GPU idling while the host enqueues (a host-bound run).
//
// Under CUDA graphs the hooks are captured with the step (engine.h: capturable): begin_step,
// before_forward and end_step still record eagerly around the graph's launch, and the two points
// of before_optimizer become event-record nodes inside the graph (cudaEventRecordExternal).
// Those two events belong to the graph, not to a step, and every replay records them again, so
// after a window they hold its last replay's times. A replayed step's split therefore takes the
// exposed communication and the optimizer of the window's last replay, and forward+backward is
// the rest of that step, measured exactly from before_forward's events to end_step's.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/engine.h"

namespace rddp::bench {

// Means per step over a window, in milliseconds.
struct StepSplit {
  double data = 0;               // the compute stream waiting for the batch's copy
  double forward_backward = 0;   // forward, loss and backward
  double exposed_comm = 0;       // waiting for collectives the reducer started
  double optimizer = 0;
  double idle = 0;               // between steps: the GPU waiting for the host
};

class StepEvents final : public StepHooks {
 public:
  // Events for `steps` steps on `stream`, forwarding the hooks to `reducer` (may be null).
  StepEvents(int steps, cudaStream_t stream, StepHooks* reducer)
      : stream_(stream),
        reducer_(reducer),
        events_(static_cast<size_t>(steps) * kPerStep),
        replayed_(static_cast<size_t>(steps), false) {
    for (cudaEvent_t& event : events_) RDDP_CUDA_CHECK(cudaEventCreate(&event));
    for (cudaEvent_t& event : in_graph_) RDDP_CUDA_CHECK(cudaEventCreate(&event));
  }
  ~StepEvents() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
    for (cudaEvent_t event : in_graph_) cudaEventDestroy(event);
  }
  StepEvents(const StepEvents&) = delete;
  StepEvents& operator=(const StepEvents&) = delete;

  int steps() const { return static_cast<int>(events_.size() / kPerStep); }

  // Before train_step of step `index` of the window, and after it returns.
  void begin_step(int index) {
    step_ = index;
    replayed_[static_cast<size_t>(index)] = false;
    record(kBegin);
  }
  void end_step() { record(kEnd); }

  void before_forward() override {
    record(kUploaded);
    if (reducer_) reducer_->before_forward();
    record(kForward);
  }
  void grad_ready(const TensorInfo& tensor) override {
    if (reducer_) reducer_->grad_ready(tensor);
  }
  void before_optimizer() override {
    if (capturing_) {
      record_in_graph(kBackwardDone);
      if (reducer_) reducer_->before_optimizer();
      record_in_graph(kOptimizer);
      return;
    }
    record(kBackwardDone);
    if (reducer_) reducer_->before_optimizer();
    record(kOptimizer);
  }

  // Capturable when the reducer is (or there is none): the events are then captured with it.
  bool capturable() const override { return reducer_ == nullptr || reducer_->capturable(); }
  void capturing(bool on) override {
    capturing_ = on;
    if (reducer_) reducer_->capturing(on);
  }
  void replayed() override {
    replayed_[static_cast<size_t>(step_)] = true;
    if (reducer_) reducer_->replayed();
  }

  // Window time in milliseconds, from the first step's begin to the last step's end. Waits for
  // the device.
  double window_ms() const {
    RDDP_CUDA_CHECK(cudaEventSynchronize(at(steps() - 1, kEnd)));
    return elapsed(at(0, kBegin), at(steps() - 1, kEnd));
  }
  // The split of the window's steps, which add up to the window's time over its steps. Call
  // after window_ms(). Replayed steps split as the comment at the top says.
  StepSplit split() const {
    StepSplit s;
    // The graph's own events: the last replay's exposed communication and optimizer. Should the
    // device refuse to time them, those parts and forward+backward read not measured (NaN)
    // rather than the benchmark losing the run's figures.
    double graph_comm = 0, graph_optimizer = 0;
    for (int i = steps() - 1; i >= 0; --i) {
      if (!replayed_[static_cast<size_t>(i)]) continue;
      graph_comm = elapsed_or_nan(in_graph(kBackwardDone), in_graph(kOptimizer));
      graph_optimizer = elapsed_or_nan(in_graph(kOptimizer), at(i, kEnd));
      break;
    }
    for (int i = 0; i < steps(); ++i) {
      if (i > 0) s.idle += elapsed(at(i - 1, kEnd), at(i, kBegin));
      s.data += elapsed(at(i, kBegin), at(i, kUploaded));
      s.exposed_comm += elapsed(at(i, kUploaded), at(i, kForward));
      if (replayed_[static_cast<size_t>(i)]) {
        s.forward_backward += elapsed(at(i, kForward), at(i, kEnd)) - graph_comm - graph_optimizer;
        s.exposed_comm += graph_comm;
        s.optimizer += graph_optimizer;
        continue;
      }
      s.forward_backward += elapsed(at(i, kForward), at(i, kBackwardDone));
      s.exposed_comm += elapsed(at(i, kBackwardDone), at(i, kOptimizer));
      s.optimizer += elapsed(at(i, kOptimizer), at(i, kEnd));
    }
    const double n = steps();
    s.data /= n;
    s.exposed_comm /= n;
    s.forward_backward /= n;
    s.optimizer /= n;
    s.idle /= n;
    return s;
  }

 private:
  enum Point { kBegin, kUploaded, kForward, kBackwardDone, kOptimizer, kEnd, kPerStep };

  cudaEvent_t at(int step, Point point) const {
    return events_[static_cast<size_t>(step) * kPerStep + point];
  }
  cudaEvent_t in_graph(Point point) const {
    return in_graph_[point == kBackwardDone ? 0 : 1];
  }
  void record(Point point) { RDDP_CUDA_CHECK(cudaEventRecord(at(step_, point), stream_)); }
  // A node of the graph being captured: recorded at every replay, and timed like any event.
  void record_in_graph(Point point) {
    RDDP_CUDA_CHECK(cudaEventRecordWithFlags(in_graph(point), stream_, cudaEventRecordExternal));
  }
  static double elapsed(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    RDDP_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
    return ms;
  }
  static double elapsed_or_nan(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    const cudaError_t status = cudaEventElapsedTime(&ms, from, to);
    if (status == cudaSuccess) return ms;
    (void)cudaGetLastError();
    static bool told = false;
    if (!told)
      std::fprintf(stderr, "cuda_step_bench: warning: the events inside the CUDA graph could not be "
                           "timed (%s); a replayed step's parts read not measured\n",
                   cudaGetErrorString(status));
    told = true;
    return NAN;
  }

  cudaStream_t stream_;
  StepHooks* reducer_;
  std::vector<cudaEvent_t> events_;
  std::vector<bool> replayed_;  // by step of the window: replayed from the graph
  cudaEvent_t in_graph_[2] = {};  // before_optimizer's two points inside the graph
  bool capturing_ = false;
  int step_ = 0;
};

}  // namespace rddp::bench
