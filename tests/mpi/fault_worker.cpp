// A short training run in which the last rank fails at step 2, in one of several ways, while
// the others wait for it in the gradient allreduce. Whatever the failure, the whole job must
// end promptly with a non-zero status and messages that say what happened:
//   hang   the rank stops responding: the others' watchdog reports the collective that did
//          not complete and aborts the job
//   kill   the rank dies by SIGKILL: the launcher ends the others (each says so on SIGTERM)
//   exit   the rank exits with status 3 without a word: likewise
//   error  the rank throws an Error: main() hands it to fatal_abort, which ends the job
// ENGINE is cpu (the default: the CPU engine, gradients over MPI), cuda (the CUDA engine, one
// GPU per rank, gradients over NCCL on the comm stream, whose unfinished collective the
// watchdog sees through its event) or cuda-graphs (the same with --cuda-graphs on: the step
// and its allreduces replayed from a CUDA graph, watched as a whole through an event after each
// launch). With graphs the rank fails at the second replayed step, after the step's eager
// broadcast and before its launch, so that the others' replay waits in its allreduces.
// Usage: fault_worker MODE TIMEOUT_MS [ENGINE]
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "mpi_test_support.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/gpu_assignment.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/ddp/watchdog.h"

using namespace rddp;
using namespace rddp::ddp;
using namespace rddp::mpi_test;

namespace {

constexpr int64_t kFailingStep = 2;
// Eager steps, the captured one, its first replay; then the failing replay and one more.
constexpr int64_t kFailingGraphStep = cuda::GraphStepPolicy::kWarmupSteps + 2;

// The reducer's hooks, with a failure injected at the first gradient of the failing step, or
// with graphs (whose replays report no gradients) after the failing step's broadcast.
class FailingHooks final : public StepHooks {
 public:
  FailingHooks(Reducer& reducer, const DistributedContext& context, std::string mode, bool graphs)
      : reducer_(reducer), context_(context), mode_(std::move(mode)),
        failing_step_(graphs ? kFailingGraphStep : kFailingStep), graphs_(graphs) {}

  void before_forward() override {
    reducer_.before_forward();
    if (graphs_) fail_at_failing_step();
  }
  void grad_ready(const TensorInfo& tensor) override {
    if (!graphs_) fail_at_failing_step();
    reducer_.grad_ready(tensor);
  }
  void before_optimizer() override { reducer_.before_optimizer(); }
  bool capturable() const override { return reducer_.capturable(); }
  void capturing(bool on) override { reducer_.capturing(on); }
  void replayed() override { reducer_.replayed(); }

  int64_t failing_step() const { return failing_step_; }

 private:
  void fail_at_failing_step() {
    if (reducer_.step() == failing_step_ && !mode_.empty()) fail_now();
  }

  void fail_now() {
    std::printf("%s fails now (%s) at step %lld\n", context_.prefix().c_str(), mode_.c_str(),
                static_cast<long long>(failing_step_));
    std::fflush(stdout);
    if (mode_ == "hang") std::this_thread::sleep_for(std::chrono::minutes(10));
    if (mode_ == "kill") raise(SIGKILL);
    if (mode_ == "exit") _exit(3);
    fail("simulated failure ", graphs_ ? "before the replay of" : "in backward at", " step ", failing_step_);
  }

  Reducer& reducer_;
  const DistributedContext& context_;
  std::string mode_;
  int64_t failing_step_;
  bool graphs_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    DistributedContext context(&argc, &argv);
    if (argc != 3 && argc != 4) fail("usage: fault_worker hang|kill|exit|error TIMEOUT_MS [cpu|cuda|cuda-graphs]");
    const std::string mode = argv[1];
    if (mode != "hang" && mode != "kill" && mode != "exit" && mode != "error") fail("unknown mode '", mode, "'");
    const std::string engine_kind = argc == 4 ? argv[3] : "cpu";
    if (engine_kind != "cpu" && engine_kind != "cuda" && engine_kind != "cuda-graphs")
      fail("unknown engine '", engine_kind, "'");
    const bool graphs = engine_kind == "cuda-graphs";
    Watchdog watchdog(std::chrono::milliseconds(std::atol(argv[2])));
    const EngineConfig config = narrow_config();
    std::unique_ptr<Engine> engine;
    std::unique_ptr<Comm> comm;
    if (engine_kind == "cpu") {
      engine = make_cpu_engine(config, 5);
      comm = make_comm(DeviceKind::cpu, context, CommOptions{&watchdog});
    } else {
      std::string reason;
      const int device = select_device(context.local_rank(), cuda::cuda_device_count_or_zero(&reason));
      check_one_rank_per_gpu(context, device);
      CudaEngineOptions cuda;
      cuda.cuda_graphs = graphs;
      engine = make_cuda_engine(config, cuda, 5);
      comm = make_comm(DeviceKind::cuda, context, CommOptions{&watchdog, device, engine->compute_stream()});
    }
    ReducerOptions options;
    options.first_bucket_mb = 0.002;
    options.bucket_mb = 0.008;
    options.first_step = 1;
    Reducer reducer(*comm, *engine, options);
    FailingHooks hooks(reducer, context, context.rank() == context.world_size() - 1 ? mode : "", graphs);
    for (int64_t step = 1; step <= hooks.failing_step() + 2; ++step) {
      engine->train_step(rank_batch(config, context.rank(), step).view(), config.optimizer.lr, &hooks);
      std::printf("%s step %lld done\n", context.prefix().c_str(), static_cast<long long>(step));
      std::fflush(stdout);
    }
    std::printf("%s finished every step, but rank %d should have failed\n", context.prefix().c_str(),
                context.world_size() - 1);
    return 0;
  } catch (const std::exception& error) {
    fatal_abort(error.what());
  }
}
