#pragma once
// The DDP step, written once over any Comm, as the engine's StepHooks:
//  - construction: rank 0's parameters and BatchNorm running statistics reach every rank
//    (DDP's constructor broadcasts them);
//  - before each training forward: rank 0's running statistics reach every rank
//    (broadcast_buffers=True), so every rank normalises with them and evaluation and
//    checkpoints see rank 0's;
//  - during backward: grad_ready() counts each bucket's gradients; a complete bucket's
//    averaging allreduce is launched at once, strictly in bucket order, while backward goes
//    on with earlier layers;
//  - before the optimizer: every bucket is waited for (on a GPU the compute stream waits for
//    the comm stream; the host does not block).
// With --grad-allreduce bf16 each bucket travels as bfloat16, as under PyTorch DDP's
// bf16_compress_hook: at launch its gradients are cast, scaled by 1/W and cast again into the
// bucket's bfloat16 staging slice (Bf16Staging), the slice is summed across ranks, and once the
// sum is complete it is widened back into the bucket's gradients.
// Each rank keeps its own batch statistics, as in PyTorch: W ranks of batch B are not one
// rank of batch W*B.
// CUDA graphs: on device memory the reducer is capturable (StepHooks). While the engine captures
// a step, the buckets' allreduces are enqueued into the graph as in any step, but the host
// neither polls them (nothing runs during a capture) nor hands them to the watchdog (they run
// only when the graph is replayed); every replay then counts one step and has the watchdog
// watch the step as a whole: the replayed allreduces are not watched one by one.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/ddp/bf16_staging.h"
#include "resnet_ddp/ddp/bucket_plan.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/grad_allreduce.h"
#include "resnet_ddp/ddp/timeline.h"
#include "resnet_ddp/engine.h"

namespace rddp::ddp {

struct ReducerOptions {
  double bucket_mb = 25.0;        // --bucket-mb; DDP's bucket_cap_mb
  double first_bucket_mb = 1.0;   // DDP's first bucket (torch.distributed's 1 MiB default)
  bool broadcast_buffers = true;  // DDP's broadcast_buffers
  GradAllreduce grad_allreduce = GradAllreduce::fp32;  // --grad-allreduce
  int64_t first_step = 0;         // the step number messages name first; see set_step()
  Timeline* timeline = nullptr;   // optional record of readiness, launches and completions
};

class Reducer final : public StepHooks {
 public:
  // `comm` must work on the engine's memory (MPI for the CPU engine, NCCL for CUDA). Collective:
  // broadcasts rank 0's parameters and running statistics, so build it after any weights or
  // checkpoint are loaded. Both `comm` and `engine` must outlive the reducer.
  Reducer(Comm& comm, Engine& engine, const ReducerOptions& options = {});

  void before_forward() override;
  void grad_ready(const TensorInfo& tensor) override;
  void before_optimizer() override;
  bool capturable() const override;
  void capturing(bool on) override;
  void replayed() override;

  // Rank 0's parameters and running statistics to every rank (collective).
  void broadcast_state();
  // Rank 0's running statistics to every rank (collective): what before_forward() does; call
  // it before evaluating or saving, so every rank uses rank 0's statistics.
  void sync_buffers();

  const BucketPlan& plan() const { return plan_; }
  // For the settings table: the backend and the bucket plan.
  std::string describe() const;

  // The number of the step in progress, or of the next one; it advances after each
  // before_optimizer(). Messages name it: "allreduce of bucket 3 at step 120".
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }

 private:
  struct InFlight {
    int bucket;
    std::shared_ptr<CommRequest> request;
    bool done;
  };
  size_t index_of(const TensorInfo& tensor) const;
  void start_step();
  void launch(int bucket, const TensorInfo& completed_by);
  void poll_in_flight();
  void finish(InFlight& flight);
  void record(TimelineEvent::Kind kind, int bucket, const std::string& tensor = {}, size_t bytes = 0);
  [[noreturn]] void fail_missing_gradients() const;

  Comm& comm_;
  Engine& engine_;
  ReducerOptions options_;
  BucketPlan plan_;
  std::vector<int> bucket_of_tensor_;  // by index into layout().tensors(); -1 for buffers
  std::vector<size_t> parameter_offsets_, parameter_indices_;  // to find a reported tensor
  std::vector<size_t> pending_;        // gradients each bucket still waits for
  std::vector<bool> reported_;         // by tensor index, this step
  int next_launch_ = 0;
  std::vector<InFlight> in_flight_;
  std::unique_ptr<Bf16Staging> staging_;  // --grad-allreduce bf16 only
  int64_t step_ = 0;
  bool capturing_ = false;
  std::vector<std::shared_ptr<CommRequest>> captured_requests_;  // until the capture ends
};

}  // namespace rddp::ddp
