#pragma once
// What the training loop needs from the job's ranks: the bucketed gradient reducer, the
// broadcasts DDP makes, the global sums of the metrics and the agreements between ranks.
// A job of one rank is a group of one, through the same code.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "resnet_ddp/ddp/grad_allreduce.h"
#include "resnet_ddp/ddp/host_collectives.h"
#include "resnet_ddp/engine.h"

namespace rddp {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;    // among the ranks on this node
  virtual int ranks_on_node() const = 0;
  virtual int nodes() const = 0;
  virtual const std::string& host() const = 0;

  // Before the engine is made: the CUDA device this rank computes on (made current, and
  // checked against the other ranks' choices); 0 for the CPU.
  virtual int prepare_device(DeviceKind kind) = 0;
  // Called once the engine exists and holds its starting weights: rank 0's parameters and
  // buffers reach every rank, and the hooks of every training step are prepared.
  virtual void attach(Engine& engine) = 0;
  // The hooks train_step runs with (null for a single process).
  virtual StepHooks* step_hooks() = 0;
  // A description of the communication set-up for the settings table (empty if none).
  virtual std::string describe() const = 0;

  // Before evaluating: every rank takes rank 0's BatchNorm running statistics.
  virtual void sync_buffers() = 0;
  virtual Metrics sum(const Metrics& local) = 0;
  // Throws Error on every rank when ranks disagree on `value` (e.g. steps per epoch).
  virtual void require_same(int64_t value, const std::string& what) = 0;
  // How many ranks' `value` differs from rank 0's, and the first of them (host_collectives.h).
  virtual ddp::RankDisagreement compare_with_rank0(uint64_t value, const std::string& what) = 0;
  // The largest `value` over the ranks and the lowest rank holding it (host_collectives.h).
  virtual ddp::RankMaximum max_over_ranks(double value, const std::string& what) = 0;
  // True on every rank when `flag` is true on any (e.g. a preemption signal on one rank).
  virtual bool any(bool flag) = 0;
  // Returns on every rank once all have called it.
  virtual void barrier(const std::string& what) = 0;
  // Rank `root`'s `bytes` on every rank (what the others pass is ignored).
  virtual std::string broadcast_from(int root, std::string bytes, const std::string& what) = 0;
  std::string broadcast_from_rank0(std::string bytes, const std::string& what) {
    return broadcast_from(0, std::move(bytes), what);
  }
};

namespace ddp {
class DistributedContext;
}
// The group of every rank of the MPI job; collectives time out after `comm_timeout_s`;
// gradients travel as `grad_allreduce`.
std::unique_ptr<ProcessGroup> make_mpi_process_group(const ddp::DistributedContext& context,
                                                     double bucket_mb, double comm_timeout_s,
                                                     ddp::GradAllreduce grad_allreduce = ddp::GradAllreduce::fp32);

}  // namespace rddp
