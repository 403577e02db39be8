// The reducer's bookkeeping in one process, over a communicator that records what it is asked
// to do: when each bucket is launched, over which slice, in which order, and what is refused.
// The averaging itself is tested across real ranks in tests/mpi.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/kernel_math/bf16.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/engine_batches.h"
#include "support/engine_outcome.h"
#include "support/forwarding_engine.h"

using namespace rddp;
using namespace rddp::ddp;

namespace {

struct Call {
  std::string kind;  // "allreduce", "broadcast", "barrier"
  const void* data = nullptr;
  size_t count = 0;  // elements (allreduce) or bytes (broadcast)
  Reduction op = Reduction::sum;
  DataType type = DataType::u8;
  int root = -1;
  std::string what;
  size_t timeline_events_before = 0;  // how much of the timeline existed at the call
};

class RecordingRequest final : public CommRequest {
 public:
  explicit RecordingRequest(int* waits, int* tests = nullptr) : waits_(waits), tests_(tests) {}
  bool test() override {  // completes only when waited for
    if (tests_) ++*tests_;
    return false;
  }
  void wait() override {
    if (!done_) ++*waits_;
    done_ = true;
  }
  void synchronize() override { wait(); }
  bool observed_complete() const override { return done_; }

 private:
  int* waits_;
  int* tests_;
  bool done_ = false;
};

// Pretends to be one of `size` ranks and leaves the data alone.
class RecordingComm final : public Comm {
 public:
  RecordingComm(int size, DeviceKind memory, const Timeline* timeline)
      : size_(size), memory_(memory), timeline_(timeline) {}
  std::vector<Call> calls;
  int waits = 0, tests = 0;

  const char* backend() const override { return "recording"; }
  DeviceKind memory() const override { return memory_; }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::shared_ptr<CommRequest> start_allreduce(void* data, size_t count, DataType type, Reduction op,
                                               const std::string& what) override {
    calls.push_back({"allreduce", data, count, op, type, -1, what, events()});
    return std::make_shared<RecordingRequest>(&waits, &tests);
  }
  std::shared_ptr<CommRequest> watch_compute(const std::string& what) override {
    calls.push_back({"watch", nullptr, 0, Reduction::sum, DataType::u8, -1, what, events()});
    return std::make_shared<RecordingRequest>(&waits);
  }
  std::shared_ptr<CommRequest> start_broadcast(void* data, size_t bytes, int root, const std::string& what) override {
    calls.push_back({"broadcast", data, bytes, Reduction::sum, DataType::u8, root, what, events()});
    return std::make_shared<RecordingRequest>(&waits);
  }
  std::shared_ptr<CommRequest> start_barrier(const std::string& what) override {
    calls.push_back({"barrier", nullptr, 0, Reduction::sum, DataType::u8, -1, what, events()});
    return std::make_shared<RecordingRequest>(&waits);
  }

 private:
  size_t events() const { return timeline_ ? timeline_->events().size() : 0; }
  int size_;
  DeviceKind memory_;
  const Timeline* timeline_;
};

EngineConfig narrow_config() { return testing::narrow_cpu_config(); }

// Buckets small enough that the narrow model fills several, numbered from `first_step`.
ReducerOptions small_buckets(Timeline* timeline, int64_t first_step = 0) {
  ReducerOptions options;
  options.first_bucket_mb = 0.001;
  options.bucket_mb = 0.004;
  options.first_step = first_step;
  options.timeline = timeline;
  return options;
}

// The engine's largest batch, from `seed`.
testing::Batch random_batch(const EngineConfig& config, uint64_t seed) {
  return testing::random_batch(config, config.max_batch, seed);
}

}  // namespace

TEST_CASE("construction broadcasts rank 0's parameters and running statistics") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  RecordingComm comm(2, DeviceKind::cpu, nullptr);
  Reducer reducer(comm, *engine);
  REQUIRE(comm.calls.size() == 2);
  CHECK(comm.calls[0].kind == "broadcast");
  CHECK(comm.calls[0].data == engine->params());
  CHECK(comm.calls[0].count == engine->layout().parameter_elements() * sizeof(float));
  CHECK(comm.calls[0].root == 0);
  CHECK(comm.calls[1].data == engine->running_stats());
  CHECK(comm.calls[1].count == engine->layout().running_stat_elements() * sizeof(float));
  CHECK(comm.waits == 2);
}

TEST_CASE("each bucket is averaged as soon as its last gradient is ready, in order, and waited for") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  Timeline timeline;
  RecordingComm comm(2, DeviceKind::cpu, &timeline);
  const ReducerOptions options = small_buckets(&timeline, 41);
  Reducer reducer(comm, *engine, options);
  const BucketPlan& plan = reducer.plan();
  REQUIRE(plan.buckets.size() >= 3);
  comm.calls.clear();
  comm.waits = 0;

  engine->train_step(random_batch(config, 2).view(), 1e-3, &reducer);

  // Before the forward: rank 0's running statistics; then one allreduce per bucket.
  REQUIRE(comm.calls.size() == 1 + plan.buckets.size());
  CHECK(comm.calls[0].kind == "broadcast");
  CHECK(comm.calls[0].data == engine->running_stats());
  CHECK(comm.calls[0].what == "broadcast of the BatchNorm running statistics at step 41");
  const auto& tensors = engine->layout().tensors();
  const auto& events = timeline.events();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    CAPTURE(b);
    const Call& call = comm.calls[1 + b];
    CHECK(call.kind == "allreduce");
    CHECK(call.op == Reduction::average);
    CHECK(call.type == DataType::f32);
    CHECK(call.data == engine->grads() + plan.buckets[b].begin);
    CHECK(call.count == plan.buckets[b].end - plan.buckets[b].begin);
    CHECK(call.what == "allreduce of bucket " + std::to_string(b) + " at step 41");
    // Launched right after the gradient that completed the bucket became ready.
    REQUIRE(call.timeline_events_before >= 1);
    const TimelineEvent& previous = events[call.timeline_events_before - 1];
    CHECK(previous.kind == TimelineEvent::Kind::grad_ready);
    CHECK(previous.tensor == tensors[plan.buckets[b].tensors.back()].name);
  }
  // The first bucket went out while backward still had gradients to produce.
  size_t last_ready = 0;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].kind == TimelineEvent::Kind::grad_ready) last_ready = i;
  CHECK(comm.calls[1].timeline_events_before <= last_ready);
  CHECK(comm.waits == 1 + static_cast<int>(plan.buckets.size()));
  CHECK(reducer.step() == 42);
  CHECK(reducer.describe().find("recording, gradients averaged in ") == 0);
}

TEST_CASE("a bucket completed out of order, a gradient reported twice or never are internal errors") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  RecordingComm comm(1, DeviceKind::cpu, nullptr);
  ReducerOptions options;
  options.first_bucket_mb = 0.001;
  options.bucket_mb = 0.004;
  const auto& tensors = engine->layout().tensors();

  SUBCASE("out of order") {
    Reducer reducer(comm, *engine, options);
    reducer.before_forward();
    const Bucket& second = reducer.plan().buckets.at(1);
    for (size_t i = 0; i + 1 < second.tensors.size(); ++i) reducer.grad_ready(tensors[second.tensors[i]]);
    CHECK_THROWS_WITH_AS(reducer.grad_ready(tensors[second.tensors.back()]),
                         doctest::Contains("gradient bucket 1 is complete"), Error);
  }
  SUBCASE("twice") {
    Reducer reducer(comm, *engine, options);
    reducer.before_forward();
    reducer.grad_ready(tensors[0]);
    CHECK_THROWS_WITH_AS(reducer.grad_ready(tensors[0]), doctest::Contains("reported twice"), Error);
  }
  SUBCASE("never") {
    Reducer reducer(comm, *engine, options);
    reducer.before_forward();
    const Bucket& first = reducer.plan().buckets.at(0);
    for (size_t index : first.tensors) reducer.grad_ready(tensors[index]);
    const std::string expected =
        "without reporting the gradients of " + tensors[reducer.plan().buckets.at(1).tensors.front()].name;
    CHECK_THROWS_WITH_AS(reducer.before_optimizer(), doctest::Contains(expected.c_str()), Error);
  }
  SUBCASE("not a parameter") {
    Reducer reducer(comm, *engine, options);
    reducer.before_forward();
    CHECK_THROWS_WITH_AS(reducer.grad_ready(engine->layout().at("bn1.running_mean")),
                         doctest::Contains("not a parameter"), Error);
  }
}

TEST_CASE("the reducer refuses a communicator on the wrong memory") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  RecordingComm comm(2, DeviceKind::cuda, nullptr);
  CHECK_THROWS_WITH_AS(Reducer(comm, *engine), doctest::Contains("needs a communicator on cpu memory"), Error);
}

namespace {

// A CPU engine that says its memory is a GPU's, so that the reducer over device memory (which
// CUDA graphs may capture) runs its bookkeeping here; nothing is captured on the CPU, so the
// test plays the CUDA engine's part in calling the hooks.
class DeviceMemoryEngine final : public testing::ForwardingEngine {
 public:
  explicit DeviceMemoryEngine(const EngineConfig& config) : ForwardingEngine(make_cpu_engine(config, 1)) {}
  DeviceKind device() const override { return DeviceKind::cuda; }
  std::string device_name() const override { return "pretend GPU"; }
};

}  // namespace

TEST_CASE("CUDA graphs: a captured step launches every bucket unpolled and uncounted; each replay counts and is watched") {
  const EngineConfig config = narrow_config();
  DeviceMemoryEngine engine(config);
  Timeline timeline;
  RecordingComm comm(2, DeviceKind::cuda, &timeline);
  const ReducerOptions options = small_buckets(&timeline, 7);
  Reducer reducer(comm, engine, options);
  const size_t buckets = reducer.plan().buckets.size();
  REQUIRE(buckets >= 3);
  CHECK(reducer.capturable());

  // An eager step polls its buckets while backward goes on.
  comm.calls.clear();
  engine.train_step(random_batch(config, 2).view(), 1e-3, &reducer);
  CHECK(comm.tests > 0);
  CHECK(reducer.step() == 8);

  // The captured step: before_forward eagerly, then the step with the reducer capturing.
  comm.calls.clear();
  comm.tests = comm.waits = 0;
  timeline.clear();
  reducer.before_forward();
  reducer.capturing(true);
  struct Captured final : StepHooks {  // the engine calls before_forward outside the graph
    Reducer& reducer;
    explicit Captured(Reducer& r) : reducer(r) {}
    void grad_ready(const TensorInfo& tensor) override { reducer.grad_ready(tensor); }
    void before_optimizer() override { reducer.before_optimizer(); }
  } captured(reducer);
  engine.train_step(random_batch(config, 3).view(), 1e-3, &captured);
  reducer.capturing(false);
  REQUIRE(comm.calls.size() == 1 + buckets);
  CHECK(comm.calls[0].what == "broadcast of the BatchNorm running statistics at step 8");
  for (size_t b = 0; b < buckets; ++b) {
    CAPTURE(b);
    CHECK(comm.calls[1 + b].kind == "allreduce");
    CHECK(comm.calls[1 + b].what == "allreduce of bucket " + std::to_string(b) + " at step 8");
  }
  CHECK(comm.tests == 0);                             // nothing runs during a capture
  CHECK(comm.waits == 1 + static_cast<int>(buckets));  // every bucket joined back
  CHECK(timeline.events().empty());                   // nothing happened yet
  CHECK(reducer.step() == 8);                         // the replays count

  // The replays: each counts one step and has the watchdog watch it.
  comm.calls.clear();
  for (int replay = 0; replay < 2; ++replay) {
    reducer.before_forward();
    reducer.replayed();
  }
  REQUIRE(comm.calls.size() == 4);
  CHECK(comm.calls[1].kind == "watch");
  CHECK(comm.calls[1].what == "training step 8, replayed from its CUDA graph with the gradient allreduces");
  CHECK(comm.calls[2].what == "broadcast of the BatchNorm running statistics at step 9");
  CHECK(comm.calls[3].what == "training step 9, replayed from its CUDA graph with the gradient allreduces");
  CHECK(reducer.step() == 10);

  // Eager steps go on as before, a smaller last batch, say.
  comm.calls.clear();
  engine.train_step(random_batch(config, 4).view(), 1e-3, &reducer);
  CHECK(comm.calls.back().what == "allreduce of bucket " + std::to_string(buckets - 1) + " at step 10");
  CHECK(reducer.step() == 11);
}

TEST_CASE("CUDA graphs: a capture that fails part-way leaves no bucket in flight") {
  const EngineConfig config = narrow_config();
  DeviceMemoryEngine engine(config);
  RecordingComm comm(2, DeviceKind::cuda, nullptr);
  Reducer reducer(comm, engine);
  reducer.before_forward();
  reducer.capturing(true);
  // Backward (last layers first) gets as far as launching the first bucket, then the capture
  // fails.
  comm.calls.clear();
  const auto& tensors = engine.layout().tensors();
  for (size_t i = tensors.size(); i-- > 0 && comm.calls.empty();)
    if (tensors[i].role == TensorRole::parameter) reducer.grad_ready(tensors[i]);
  REQUIRE(comm.calls.size() == 1);
  CHECK(comm.calls[0].what == "allreduce of bucket 0 at step 0");
  reducer.capturing(false);
  // The next step starts afresh (before_forward checks nothing is in flight) and completes.
  comm.calls.clear();
  engine.train_step(random_batch(config, 5).view(), 1e-3, &reducer);
  CHECK(reducer.step() == 1);
}

TEST_CASE("a reducer over host memory cannot be captured") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  RecordingComm comm(2, DeviceKind::cpu, nullptr);
  Reducer reducer(comm, *engine);
  CHECK_FALSE(reducer.capturable());
}

TEST_CASE("one rank broadcasts no buffers before the forward") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  RecordingComm comm(1, DeviceKind::cpu, nullptr);
  Reducer reducer(comm, *engine);
  comm.calls.clear();
  engine->train_step(random_batch(config, 3).view(), 1e-3, &reducer);
  for (const Call& call : comm.calls) CHECK(call.kind == "allreduce");
  CHECK(comm.calls.size() == reducer.plan().buckets.size());
}

// With --grad-allreduce bf16 the comm is handed each bucket's bfloat16 staging slice to sum;
// the recording comm leaves it alone, so what comes back into the gradients is this rank's
// share: bf16(bf16(g) / W), widened.
TEST_CASE("bf16: each bucket is summed from its own staging slice, made once, and widened back") {
  const EngineConfig config = narrow_config();
  auto engine = make_cpu_engine(config, 1);
  Timeline timeline;
  RecordingComm comm(4, DeviceKind::cpu, &timeline);
  ReducerOptions options = small_buckets(&timeline);
  options.grad_allreduce = GradAllreduce::bf16;
  Reducer reducer(comm, *engine, options);
  const BucketPlan& plan = reducer.plan();
  REQUIRE(plan.buckets.size() >= 3);
  CHECK(reducer.describe().find("recording, gradients averaged as bfloat16") == 0);
  const float* grads = engine->grads();
  const size_t elements = engine->layout().parameter_elements();

  // Keep each gradient as backward reports it, before the reducer compresses it.
  struct Capture final : StepHooks {
    Reducer& reducer;
    Engine& engine;
    std::vector<float> local;
    Capture(Reducer& r, Engine& e) : reducer(r), engine(e), local(e.layout().parameter_elements()) {}
    void before_forward() override { reducer.before_forward(); }
    void grad_ready(const TensorInfo& tensor) override {
      std::copy_n(engine.grads() + tensor.offset, tensor.numel, local.begin() + static_cast<long>(tensor.offset));
      reducer.grad_ready(tensor);
    }
    void before_optimizer() override { reducer.before_optimizer(); }
  } hooks(reducer, *engine);

  std::vector<const void*> first_step_buffers;
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    comm.calls.clear();
    timeline.clear();
    // The optimizer reads the gradients and leaves them, so they can be compared after the step.
    engine->train_step(random_batch(config, 5 + static_cast<uint64_t>(step)).view(), 1e-3, &hooks);
    std::vector<const void*> buffers;
    size_t bucket = 0;
    for (const Call& call : comm.calls) {
      if (call.kind != "allreduce") continue;
      CAPTURE(bucket);
      CHECK(call.type == DataType::bf16);
      CHECK(call.op == Reduction::sum);
      CHECK(call.count == plan.buckets[bucket].end - plan.buckets[bucket].begin);
      // Its own memory, not the gradients, and not another bucket's.
      const auto* begin = static_cast<const char*>(call.data);
      CHECK((begin + call.count * 2 <= reinterpret_cast<const char*>(grads) ||
             begin >= reinterpret_cast<const char*>(grads + elements)));
      if (!buffers.empty()) CHECK(begin >= static_cast<const char*>(buffers.back()));
      buffers.push_back(call.data);
      ++bucket;
    }
    CHECK(bucket == plan.buckets.size());
    if (step == 0) first_step_buffers = buffers;
    else CHECK(buffers == first_step_buffers);  // allocated once, not per step

    size_t wrong = 0;
    for (size_t i = 0; i < elements; ++i)
      wrong += grads[i] != bf16::to_float(bf16::from_float(bf16::to_float(bf16::from_float(hooks.local[i])) * 0.25f));
    CHECK(wrong == 0);
    // Half the bytes of float32 go to the comm.
    CHECK(timeline.bytes_launched(reducer.step() - 1) == elements * 2);
  }
}
