// The device-memory half on real GPUs: the NCCL communicator's collectives, and the reducer
// over it driven by an engine whose "backward" writes known gradients on its compute stream,
// so the events that order the comm stream after the compute stream (and back) are exercised,
// eagerly and captured into a CUDA graph with the step, as --cuda-graphs on does.
// Where two ranks of a node get the same GPU (fewer GPUs than ranks, or every rank given the same
// CUDA_VISIBLE_DEVICES), every rank must refuse to share it instead.
// Prints SKIPPED and exits 77 where no CUDA device answers.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "mpi_test_support.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/nccl_comm.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/model_state.h"

using namespace rddp;
using namespace rddp::ddp;
using namespace rddp::mpi_test;

namespace {

// A device buffer that the test fills and reads through the compute stream.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    RDDP_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(1, count) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() { return data_; }
  void upload(const std::vector<T>& values, cudaStream_t stream) {
    RDDP_CUDA_CHECK(cudaMemcpyAsync(data_, values.data(), count_ * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  std::vector<T> download(cudaStream_t stream) {
    std::vector<T> values(count_);
    RDDP_CUDA_CHECK(cudaMemcpyAsync(values.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost, stream));
    RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return values;
  }

 private:
  size_t count_;
  T* data_ = nullptr;
};

// A rank's gradient value for element i, exact in float and different on every rank.
float gradient_value(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 97) - 40); }

// Device buffers laid out like the narrow model; a train step writes gradient_value() into
// each tensor's gradient on the compute stream, in layout order, reporting each as ready.
class ScriptedCudaEngine final : public Engine {
 public:
  ScriptedCudaEngine(const ModelSpec& spec, int rank, cudaStream_t stream)
      : state_(spec),
        rank_(rank),
        stream_(stream),
        params_(state_.layout.parameter_elements()),
        grads_(state_.layout.parameter_elements()),
        running_(state_.layout.running_stat_elements()),
        values_(state_.layout.parameter_elements()) {
    // The alignment padding between tensors is averaged too; like the real engines' it is zero.
    RDDP_CUDA_CHECK(
        cudaMemsetAsync(grads_.get(), 0, state_.layout.parameter_elements() * sizeof(float), stream_));
    std::vector<float> values(layout().parameter_elements(), 0.0f);
    for (size_t i = 0; i < values.size(); ++i) values[i] = gradient_value(rank_, i);
    values_.upload(values, stream_);
  }

  DeviceKind device() const override { return DeviceKind::cuda; }
  std::string device_name() const override { return "scripted cuda"; }
  const ParamLayout& layout() const override { return state_.layout; }
  float* params() override { return params_.get(); }
  float* grads() override { return grads_.get(); }
  float* running_stats() override { return running_.get(); }
  void* compute_stream() override { return stream_; }

  void train_step(const HostBatch&, double, StepHooks* hooks) override {
    hooks->before_forward();
    backward(*hooks);
    reduced = grads_.download(stream_);  // on the compute stream: after the averaging
  }

  // As the CUDA engine runs a step with capturable hooks (cuda_engine.cpp): before_forward
  // eagerly, the rest captured into a CUDA graph with the hooks capturing, then `replays`
  // launches of the graph, each with before_forward before it and replayed() after it. The
  // gradients are cleared before each launch, so only the replay can have written them.
  void train_steps_captured(StepHooks& hooks, int replays) {
    hooks.before_forward();
    hooks.capturing(true);
    RDDP_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      backward(hooks);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    hooks.capturing(false);
    RDDP_CUDA_CHECK(ended);
    cudaGraphExec_t exec = nullptr;
    RDDP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < replays; ++replay) {
      if (replay > 0) hooks.before_forward();
      RDDP_CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, layout().parameter_elements() * sizeof(float), stream_));
      RDDP_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      hooks.replayed();
    }
    reduced = grads_.download(stream_);
    RDDP_CUDA_CHECK(cudaGraphExecDestroy(exec));
    RDDP_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  void eval_step(const HostBatch&) override { fail("the scripted engine only trains"); }
  Metrics take_metrics() override { return {}; }
  void save_state(ModelState<float>&, OptimizerState&) override { fail("the scripted engine keeps no state"); }
  void load_state(const ModelState<float>&, const OptimizerState*) override {
    fail("the scripted engine keeps no state");
  }

  std::vector<float> reduced;
  DeviceBuffer<float>& param_buffer() { return params_; }
  DeviceBuffer<float>& running_buffer() { return running_; }

 private:
  // Each tensor's gradient is enqueued before it is reported, as a CUDA backward does.
  void backward(StepHooks& hooks) {
    for (const TensorInfo& info : layout().tensors()) {
      if (info.role != TensorRole::parameter) continue;
      RDDP_CUDA_CHECK(cudaMemcpyAsync(grads_.get() + info.offset, values_.get() + info.offset,
                                      info.numel * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      hooks.grad_ready(info);
    }
    hooks.before_optimizer();
  }

  ModelState<float> state_;
  int rank_;
  cudaStream_t stream_;
  DeviceBuffer<float> params_, grads_, running_;
  DeviceBuffer<float> values_;  // this rank's gradient_value()s
};

void test_collectives(const DistributedContext& context, Comm& comm, cudaStream_t stream, RankChecks& checks) {
  const int rank = context.rank(), world = context.world_size();
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((rank + 1) * i) * 0.25f;
  DeviceBuffer<float> floats(values.size());
  floats.upload(values, stream);
  comm.start_allreduce(floats.get(), values.size(), DataType::f32, Reduction::sum, "test sum")->wait();
  const std::vector<float> sums = floats.download(stream);
  bool exact = true;
  for (size_t i = 0; i < sums.size(); ++i) exact &= sums[i] == static_cast<float>(i * 0.25 * world * (world + 1) / 2);
  checks.check(exact, "NCCL allreduce sum of f32, ordered between uploads and downloads on the compute stream");

  DeviceBuffer<double> average(1);
  average.upload({rank + 1.0}, stream);
  comm.start_allreduce(average.get(), 1, DataType::f64, Reduction::average, "test average")->wait();
  checks.check(std::fabs(average.download(stream)[0] - (world + 1) / 2.0) < 1e-12, "NCCL allreduce average of f64");

  DeviceBuffer<int64_t> low(1), high(1);
  low.upload({rank * 7 - 3}, stream);
  high.upload({rank * 7 - 3}, stream);
  auto min = comm.start_allreduce(low.get(), 1, DataType::i64, Reduction::min, "test min");
  auto max = comm.start_allreduce(high.get(), 1, DataType::i64, Reduction::max, "test max");
  max->synchronize();
  min->synchronize();
  checks.check(min->test() && max->observed_complete(), "synchronized requests report completion");
  checks.check(low.download(stream)[0] == -3 && high.download(stream)[0] == (world - 1) * 7 - 3,
               "NCCL allreduce min and max of i64");

  DeviceBuffer<unsigned char> bytes(333);
  bytes.upload(std::vector<unsigned char>(333, static_cast<unsigned char>(rank)), stream);
  comm.start_broadcast(bytes.get(), 333, world - 1, "test broadcast")->wait();
  bool from_last = true;
  for (unsigned char byte : bytes.download(stream)) from_last &= byte == world - 1;
  checks.check(from_last, "NCCL broadcast from the last rank");
  comm.barrier("test barrier");
  checks.check(comm.async_error().empty(), "NCCL reports no asynchronous error");
}

// With --grad-allreduce bf16 each bucket travels as bfloat16, scaled by 1/W, and is summed in
// bfloat16: the bound on its error is ddp_cpu_test's, W+1 roundings of relative 2^-8 each of the
// mean of |g|, and every result is a bfloat16 value.
void test_reducer(const DistributedContext& context, Comm& comm, cudaStream_t stream, GradAllreduce grad_allreduce,
                  bool captured, RankChecks& checks) {
  const int rank = context.rank(), world = context.world_size();
  const bool bf16 = grad_allreduce == GradAllreduce::bf16;
  ScriptedCudaEngine engine(narrow_config().spec, rank, stream);
  // Every rank starts from its own parameters and statistics: construction must bring rank 0's.
  const size_t n = engine.layout().parameter_elements(), m = engine.layout().running_stat_elements();
  engine.param_buffer().upload(std::vector<float>(n, static_cast<float>(rank + 1)), stream);
  engine.running_buffer().upload(std::vector<float>(m, static_cast<float>(-rank - 1)), stream);
  ReducerOptions options;
  options.first_bucket_mb = 0.002;
  options.bucket_mb = 0.008;
  options.grad_allreduce = grad_allreduce;
  Reducer reducer(comm, engine, options);
  checks.check(engine.param_buffer().download(stream) == std::vector<float>(n, 1.0f) &&
                   engine.running_buffer().download(stream) == std::vector<float>(m, -1.0f),
               "the reducer broadcasts rank 0's parameters and running statistics over NCCL");

  // An eager step first, as the engine's warm-up steps come before a capture (NCCL connects
  // its peers at a communicator's first collectives, which a capture must not be the first of).
  engine.train_step(HostBatch{}, 0.0, &reducer);
  if (captured) {
    engine.train_steps_captured(reducer, 2);
    checks.check(reducer.step() == 3, "a captured step and its 2 replays count 2 steps (" +
                                          std::to_string(reducer.step() - 1) + " counted)");
  }
  std::vector<bool> in_tensor(n, false);
  for (const TensorInfo& info : engine.layout().tensors())
    if (info.role == TensorRole::parameter)
      std::fill_n(in_tensor.begin() + static_cast<long>(info.offset), info.numel, true);
  const double bf16_bound = std::pow(1 + std::ldexp(1.0, -8), world + 1) * (1 + std::ldexp(1.0, -24)) - 1;
  size_t bad = 0, not_bf16 = 0;
  for (size_t i = 0; i < n; ++i) {
    double mean = 0, magnitude = 0;
    if (in_tensor[i])
      for (int r = 0; r < world; ++r) {
        mean += gradient_value(r, i) / static_cast<double>(world);
        magnitude += std::fabs(gradient_value(r, i)) / world;
      }
    const double error = std::fabs(engine.reduced[i] - mean);
    // ncclAvg scales each rank's value by 1/W in float before summing.
    if (error > (bf16 ? bf16_bound * magnitude : 1e-6 * (1 + std::fabs(mean)))) ++bad;
    uint32_t bits;
    std::memcpy(&bits, &engine.reduced[i], sizeof bits);
    not_bf16 += (bits & 0xFFFFu) != 0;
  }
  const std::string how = std::string(bf16 ? " as bfloat16" : "") + (captured ? ", replayed from a CUDA graph," : "");
  checks.check(bad == 0, "gradients averaged over NCCL" + how + " bucket by bucket equal the mean of the ranks' (" +
                             std::to_string(bad) + " of " + std::to_string(n) + " off; " +
                             std::to_string(reducer.plan().buckets.size()) + " buckets)");
  if (bf16) checks.check(not_bf16 == 0, std::to_string(not_bf16) + " averaged gradients are not bfloat16 values");
  checks.check(same_on_every_rank(context, engine.reduced),
               "gradients averaged over NCCL" + how + " are bit-identical on every rank");
}

// Whether two ranks of some node selected the same GPU, by its PCI bus id: each rank may see
// every GPU of its node or, under a per-task CUDA_VISIBLE_DEVICES, only its own as device 0.
bool some_gpu_shared(const DistributedContext& context, int device) {
  constexpr int kBusIdLength = 32;
  char bus_id[kBusIdLength] = {};
  RDDP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, kBusIdLength, device));
  std::vector<char> all(static_cast<size_t>(kBusIdLength) * context.local_size());
  RDDP_MPI_CHECK(MPI_Allgather(bus_id, kBusIdLength, MPI_CHAR, all.data(), kBusIdLength, MPI_CHAR, context.node()));
  std::set<std::string> distinct;
  for (int r = 0; r < context.local_size(); ++r) distinct.emplace(&all[static_cast<size_t>(r) * kBusIdLength]);
  int shared = static_cast<int>(distinct.size()) < context.local_size() ? 1 : 0;
  RDDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, context.world()));
  return shared != 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    DistributedContext context(&argc, &argv);
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
      if (context.rank() == 0)
        std::printf("SKIPPED: nccl tests: no CUDA device answers (%s)\n",
                    status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found 0 devices");
      return 77;
    }
    RankChecks checks(context);
    const int device = select_device(context.local_rank(), devices);
    RDDP_CUDA_CHECK(cudaSetDevice(device));
    cudaStream_t stream = nullptr;
    RDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    Watchdog watchdog(std::chrono::seconds(60));
    if (some_gpu_shared(context, device)) {
      // Two ranks would share a GPU, which every rank must refuse together, with the message
      // naming the ranks and the GPU.
      std::string message;
      try {
        make_nccl_comm(context, device, stream, &watchdog);
      } catch (const AllRanksError& error) {
        message = error.what();
      }
      checks.note("refusal seen by this rank: " + message);
      checks.check(message.find("all use the GPU at PCI bus id") != std::string::npos ||
                       message.find("refused its GPU") != std::string::npos,
                   "ranks sharing a GPU are refused on every rank");
    } else {
      auto comm = make_nccl_comm(context, device, stream, &watchdog);
      test_collectives(context, *comm, stream, checks);
      for (bool captured : {false, true}) {
        test_reducer(context, *comm, stream, GradAllreduce::fp32, captured, checks);
        test_reducer(context, *comm, stream, GradAllreduce::bf16, captured, checks);
      }
    }
    RDDP_CUDA_CHECK(cudaStreamDestroy(stream));
    return checks.finish();
  } catch (const std::exception& error) {
    fatal_abort(error.what());
  }
}
