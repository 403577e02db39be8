#pragma once
// Checks of how the job was launched and which GPU each rank takes, as pure functions over
// what the ranks report, so each refusal and its message are testable without a launcher or
// a GPU. Each throws Error saying what is wrong and the fix.
#include <optional>
#include <string>
#include <vector>

namespace rddp::ddp {

// What Slurm says about this task, when srun started it.
struct SlurmTask {
  // Tasks in this job step: SLURM_STEP_NUM_TASKS, or SLURM_NTASKS inside a step (SLURM_STEP_ID
  // set) on Slurm versions without the former. Outside a step SLURM_NTASKS describes the
  // allocation, which mpirun may legitimately use only part of, so it is not read.
  std::optional<long> step_tasks;
  std::optional<long> local_id;  // SLURM_LOCALID: this task's index on its node

  // Reads the environment; throws Error on a value that is not an integer.
  static SlurmTask from_environment();
};

// Refuses a step whose tasks MPI does not see as one job: srun without PMI support starts
// each task as its own one-rank job (fix: srun --mpi=pmix). When every rank is a task of the
// step, also refuses a local rank that disagrees with SLURM_LOCALID.
void check_slurm_launch(const SlurmTask& task, int world_size, int local_rank);

// The CUDA device of a rank: local_rank % device_count. Throws when no device is visible.
int select_device(int local_rank, int device_count);

// NCCL cannot connect MIG instances (no peer-to-peer or CUDA IPC between GPU instances), so a
// job of more than one rank refuses a device whose name says it is one ("... MIG 1g.5gb").
void check_not_mig(const std::string& device_name, int world_size);

// The ranks of one node and the PCI bus id of the GPU each took: refuses two ranks on one
// GPU, naming them. `bus_ids[i]` belongs to global rank `ranks[i]`.
void check_distinct_gpus(const std::vector<int>& ranks, const std::vector<std::string>& bus_ids,
                         const std::string& host);

}  // namespace rddp::ddp
