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
#include <cuda_runtime_api.h>

#include <cmath>
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
      : stream_(stream), reducer_(reducer), events_(static_cast<size_t>(steps) * kPerStep) {
    for (cudaEvent_t& event : events_) RDDP_CUDA_CHECK(cudaEventCreate(&event));
  }
  ~StepEvents() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  StepEvents(const StepEvents&) = delete;
  StepEvents& operator=(const StepEvents&) = delete;

  int steps() const { return static_cast<int>(events_.size() / kPerStep); }

  // Before train_step of step `index` of the window, and after it returns.
  void begin_step(int index) {
    step_ = index;
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
    record(kBackwardDone);
    if (reducer_) reducer_->before_optimizer();
    record(kOptimizer);
  }

  // Window time in milliseconds, from the first step's begin to the last step's end. Waits for
  // the device.
  double window_ms() const {
    RDDP_CUDA_CHECK(cudaEventSynchronize(at(steps() - 1, kEnd)));
    return elapsed(at(0, kBegin), at(steps() - 1, kEnd));
  }
  // The split of the window's steps, which add up to the window's time over its steps. Call
  // after window_ms().
  // With `whole_steps` (the engine ran without these hooks, as under --cuda-graphs, where the
  // step is one graph launch with no boundaries inside it to record at) only idle is measured;
  // the parts of the step are NaN, not measured, rather than zeros that would read as measured.
  StepSplit split(bool whole_steps = false) const {
    StepSplit s;
    if (whole_steps) s.data = s.forward_backward = s.exposed_comm = s.optimizer = NAN;
    for (int i = 0; i < steps(); ++i) {
      if (i > 0) s.idle += elapsed(at(i - 1, kEnd), at(i, kBegin));
      if (whole_steps) continue;
      s.data += elapsed(at(i, kBegin), at(i, kUploaded));
      s.exposed_comm += elapsed(at(i, kUploaded), at(i, kForward));
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
  void record(Point point) { RDDP_CUDA_CHECK(cudaEventRecord(at(step_, point), stream_)); }
  static double elapsed(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    RDDP_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
    return ms;
  }

  cudaStream_t stream_;
  StepHooks* reducer_;
  std::vector<cudaEvent_t> events_;
  int step_ = 0;
};

}  // namespace rddp::bench
