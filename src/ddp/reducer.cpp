// The bucketed gradient reducer: DDP's step over any communicator.
#include "resnet_ddp/ddp/reducer.h"

#include <algorithm>

#include "resnet_ddp/error.h"
#include "resnet_ddp/profile_range.h"

namespace rddp::ddp {

Reducer::Reducer(Comm& comm, Engine& engine, const ReducerOptions& options)
    : comm_(comm),
      engine_(engine),
      options_(options),
      plan_(plan_buckets(engine.layout(), options.first_bucket_mb, options.bucket_mb)),
      step_(options.first_step) {
  if (comm.memory() != engine.device())
    fail("internal error: the gradient reducer of the ", engine.device_name(), " engine needs a "
         "communicator on ", to_string(engine.device()), " memory, not ", comm.backend());
  const auto& tensors = engine.layout().tensors();
  bucket_of_tensor_.assign(tensors.size(), -1);
  for (size_t b = 0; b < plan_.buckets.size(); ++b)
    for (size_t index : plan_.buckets[b].tensors) {
      bucket_of_tensor_[index] = static_cast<int>(b);
      parameter_offsets_.push_back(tensors[index].offset);
      parameter_indices_.push_back(index);
    }
  // Allocated once here, not per step as the hook's .to(torch.bfloat16) does.
  if (options_.grad_allreduce == GradAllreduce::bf16) staging_ = make_bf16_staging(engine, plan_);
  start_step();
  broadcast_state();
}

void Reducer::start_step() {
  pending_.clear();
  for (const Bucket& bucket : plan_.buckets) pending_.push_back(bucket.tensors.size());
  reported_.assign(engine_.layout().tensors().size(), false);
  next_launch_ = 0;
}

void Reducer::broadcast_state() {
  const ParamLayout& layout = engine_.layout();
  auto params = comm_.start_broadcast(engine_.params(), layout.parameter_elements() * sizeof(float), 0,
                                      "broadcast of the parameters from rank 0");
  auto running = comm_.start_broadcast(engine_.running_stats(), layout.running_stat_elements() * sizeof(float),
                                       0, "broadcast of the BatchNorm running statistics from rank 0");
  params->wait();
  running->wait();
}

void Reducer::sync_buffers() {
  if (comm_.size() == 1) return;
  const ProfileRange range("broadcast batchnorm statistics");
  comm_.start_broadcast(engine_.running_stats(), engine_.layout().running_stat_elements() * sizeof(float), 0,
                        "broadcast of the BatchNorm running statistics at step " + std::to_string(step_))
      ->wait();
}

void Reducer::before_forward() {
  RDDP_ASSERT(in_flight_.empty());
  start_step();
  if (options_.broadcast_buffers) sync_buffers();
}

size_t Reducer::index_of(const TensorInfo& tensor) const {
  const auto found = std::lower_bound(parameter_offsets_.begin(), parameter_offsets_.end(), tensor.offset);
  const size_t position = static_cast<size_t>(found - parameter_offsets_.begin());
  if (tensor.role != TensorRole::parameter || found == parameter_offsets_.end() || *found != tensor.offset ||
      engine_.layout().tensors()[parameter_indices_[position]].name != tensor.name)
    fail("internal error: the gradient reducer was told of '", tensor.name,
         "', which is not a parameter of the engine's layout; please report this");
  return parameter_indices_[position];
}

void Reducer::grad_ready(const TensorInfo& tensor) {
  const size_t index = index_of(tensor);
  if (reported_[index])
    fail("internal error: the gradient of ", tensor.name, " was reported twice at step ", step_,
         "; please report this");
  reported_[index] = true;
  const int bucket = bucket_of_tensor_[index];
  if (!capturing_) record(TimelineEvent::Kind::grad_ready, bucket, tensor.name);
  if (--pending_[bucket] == 0) {
    // Every rank must launch the same collectives in the same order, or they pair up wrongly
    // and hang; the layout makes buckets complete in order, so anything else is a bug.
    if (bucket != next_launch_)
      fail("internal error: gradient bucket ", bucket, " is complete (its last gradient is ", tensor.name,
           ") before bucket ", next_launch_, " at step ", step_,
           ": gradients were not reported in layout order; please report this");
    launch(bucket, tensor);
  }
  if (!capturing_) poll_in_flight();
}

void Reducer::launch(int bucket, const TensorInfo& completed_by) {
  const Bucket& slice = plan_.buckets[bucket];
  const size_t count = slice.end - slice.begin;
  const std::string what = "allreduce of bucket " + std::to_string(bucket) + " at step " + std::to_string(step_);
  const ProfileRange range("allreduce bucket " + std::to_string(bucket));
  std::shared_ptr<CommRequest> request;
  DataType type = DataType::f32;
  if (staging_) {
    // bf16_compress_hook: bucket.to(torch.bfloat16).div_(world_size), then a sum. The share is
    // 1/W computed in float, as PyTorch's CUDA kernel takes the reciprocal of the divisor.
    type = DataType::bf16;
    staging_->compress(bucket, 1.0f / static_cast<float>(comm_.size()));
    request = comm_.start_allreduce(staging_->buffer(bucket), count, type, Reduction::sum, what);
  } else {
    request = comm_.start_allreduce(engine_.grads() + slice.begin, count, type, Reduction::average, what);
  }
  if (!capturing_) record(TimelineEvent::Kind::bucket_launched, bucket, completed_by.name, count * size_of(type));
  in_flight_.push_back({bucket, std::move(request), false});
  ++next_launch_;
}

void Reducer::poll_in_flight() {
  // Besides noting completions, testing is what moves MPI's nonblocking collectives on while
  // backward computes.
  for (InFlight& flight : in_flight_) {
    if (flight.done || !flight.request->test()) continue;
    finish(flight);
  }
}

// The bfloat16 sum is widened into the gradients as soon as it is known complete, as the hook's
// decompress callback runs when its future completes: on a GPU the comm stream has passed
// it, so the cast may be enqueued on the compute stream at once.
void Reducer::finish(InFlight& flight) {
  flight.done = true;
  if (staging_) staging_->decompress(flight.bucket);
  if (!capturing_) record(TimelineEvent::Kind::bucket_done, flight.bucket);
}

void Reducer::before_optimizer() {
  if (next_launch_ != static_cast<int>(plan_.buckets.size())) fail_missing_gradients();
  const ProfileRange range("wait for allreduce");
  for (InFlight& flight : in_flight_) {
    if (flight.done) continue;
    flight.request->wait();
    finish(flight);
  }
  // The requests' events took part in the capture: they are released once it has ended.
  if (capturing_)
    for (InFlight& flight : in_flight_) captured_requests_.push_back(std::move(flight.request));
  in_flight_.clear();
  // A captured step has not run: its replays count.
  if (!capturing_) ++step_;
}

bool Reducer::capturable() const { return comm_.memory() == DeviceKind::cuda; }

void Reducer::capturing(bool on) {
  RDDP_ASSERT(capturable());
  capturing_ = on;
  if (on) return;
  captured_requests_.clear();
  // A capture that failed part-way leaves its requests behind; they never run.
  if (!in_flight_.empty()) {
    in_flight_.clear();
    start_step();
  }
}

void Reducer::replayed() {
  comm_.watch_compute("training step " + std::to_string(step_) +
                      ", replayed from its CUDA graph with the gradient allreduces");
  ++step_;
}

void Reducer::fail_missing_gradients() const {
  constexpr int kListed = 5;
  std::string missing;
  int count = 0;
  const auto& tensors = engine_.layout().tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (bucket_of_tensor_[i] < 0 || reported_[i]) continue;
    if (count++ < kListed) missing += (missing.empty() ? "" : ", ") + tensors[i].name;
  }
  if (count > kListed) missing += " and " + std::to_string(count - kListed) + " more";
  fail("internal error: backward reached the optimizer at step ", step_, " without reporting the gradients of ",
       missing, "; their buckets were never averaged; please report this");
}

void Reducer::record(TimelineEvent::Kind kind, int bucket, const std::string& tensor, size_t bytes) {
  if (options_.timeline) options_.timeline->record(kind, step_, bucket, tensor, bytes);
}

std::string Reducer::describe() const {
  return std::string(comm_.backend()) + ", gradients averaged " +
         (staging_ ? "as bfloat16 (sent as bf16, summed in bf16) " : "") + "in " + ddp::describe(plan_) +
         (options_.broadcast_buffers ? ", rank 0's BatchNorm statistics broadcast before each step" : "");
}

}  // namespace rddp::ddp
