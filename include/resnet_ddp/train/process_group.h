#pragma once
// What the training loop needs from the job's ranks. A single process has a trivial group;
// an MPI job's group (src/train/mpi_process_group.cpp) adds the bucketed gradient reducer,
// the broadcasts DDP makes, and the global sums of the metrics.
#include <cstdint>
#include <memory>
#include <string>

#include "resnet_ddp/engine.h"

namespace rddp {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;    // among the ranks on this node
  virtual int ranks_on_node() const = 0;
  virtual const std::string& host() const = 0;

  // Called once the engine exists: rank 0's parameters and buffers reach every rank, and the
  // hooks of every training step are prepared.
  virtual void attach(Engine& engine) = 0;
  // The hooks train_step runs with (null for a single process).
  virtual StepHooks* step_hooks() = 0;
  // A description of the communication set-up for the settings table (empty if none).
  virtual std::string describe() const = 0;

  virtual Metrics sum(const Metrics& local) = 0;
  // Throws Error on every rank when ranks disagree on `value` (e.g. steps per epoch).
  virtual void require_same(int64_t value, const std::string& what) = 0;
  // True on every rank when `flag` is true on any (e.g. a preemption signal on one rank).
  virtual bool any(bool flag) = 0;
};

std::unique_ptr<ProcessGroup> make_single_process_group();

}  // namespace rddp
