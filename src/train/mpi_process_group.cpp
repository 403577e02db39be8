// The training loop's view of an MPI job: the distributed layer (src/ddp) behind the
// ProcessGroup interface. Gradients and buffers travel on the engine's memory (NCCL for the
// GPU, MPI for the CPU); metrics and agreements travel over MPI on the host.
#include <chrono>

#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/gpu_assignment.h"
#include "resnet_ddp/ddp/host_collectives.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/train/process_group.h"

namespace rddp {

namespace {

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(const ddp::DistributedContext& context, double bucket_mb, double comm_timeout_s,
                  ddp::GradAllreduce grad_allreduce)
      : context_(context),
        bucket_mb_(bucket_mb),
        grad_allreduce_(grad_allreduce),
        watchdog_(std::chrono::milliseconds(static_cast<int64_t>(comm_timeout_s * 1000))),
        host_comm_(ddp::make_comm(DeviceKind::cpu, context, {&watchdog_, 0, nullptr})) {}

  int rank() const override { return context_.rank(); }
  int size() const override { return context_.world_size(); }
  int local_rank() const override { return context_.local_rank(); }
  int ranks_on_node() const override { return context_.local_size(); }
  int nodes() const override { return context_.nodes(); }
  const std::string& host() const override { return context_.host(); }

  int prepare_device(DeviceKind kind) override {
    if (kind == DeviceKind::cpu) return 0;
    std::string reason;
    device_ = ddp::select_device(context_.local_rank(), cuda::cuda_device_count_or_zero(&reason));
    device_name_ = ddp::check_one_rank_per_gpu(context_, device_);
    return device_;
  }

  void attach(Engine& engine) override {
    ddp::CommOptions options;
    options.watchdog = &watchdog_;
    options.device = device_;
    options.compute_stream = engine.compute_stream();
    // The CPU engine's gradients live in host memory, where the host communicator works.
    step_comm_ = engine.device() == DeviceKind::cpu ? nullptr : ddp::make_comm(engine.device(), context_, options);
    ddp::ReducerOptions reducer_options;
    reducer_options.bucket_mb = bucket_mb_;
    reducer_options.grad_allreduce = grad_allreduce_;
    reducer_ = std::make_unique<ddp::Reducer>(step_comm_ ? *step_comm_ : *host_comm_, engine, reducer_options);
  }

  StepHooks* step_hooks() override { return reducer_.get(); }

  std::string describe() const override {
    return context_.describe() + "; " + (reducer_ ? reducer_->describe() : std::string()) + "; timeout " +
           std::to_string(watchdog_.timeout().count() / 1000) + " s";
  }

  void sync_buffers() override {
    if (reducer_ && size() > 1) reducer_->sync_buffers();
  }
  Metrics sum(const Metrics& local) override { return ddp::reduce_metrics(*host_comm_, local); }
  void require_same(int64_t value, const std::string& what) override {
    ddp::require_same(*host_comm_, value, what);
  }
  ddp::RankDisagreement compare_with_rank0(uint64_t value, const std::string& what) override {
    return ddp::ranks_differing_from_rank0(*host_comm_, value, what);
  }
  ddp::RankMaximum max_over_ranks(double value, const std::string& what) override {
    return ddp::max_over_ranks(*host_comm_, value, what);
  }
  bool any(bool flag) override { return ddp::any_rank(*host_comm_, flag, "stop request check"); }
  void barrier(const std::string& what) override { host_comm_->barrier(what); }
  std::string broadcast_from(int root, std::string bytes, const std::string& what) override {
    return ddp::broadcast_from(*host_comm_, root, std::move(bytes), what);
  }

 private:
  const ddp::DistributedContext& context_;
  double bucket_mb_;
  ddp::GradAllreduce grad_allreduce_;
  ddp::Watchdog watchdog_;
  std::unique_ptr<ddp::Comm> host_comm_, step_comm_;
  std::unique_ptr<ddp::Reducer> reducer_;
  int device_ = 0;
  std::string device_name_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_process_group(const ddp::DistributedContext& context, double bucket_mb,
                                                     double comm_timeout_s, ddp::GradAllreduce grad_allreduce) {
  return std::make_unique<MpiProcessGroup>(context, bucket_mb, comm_timeout_s, grad_allreduce);
}

}  // namespace rddp
