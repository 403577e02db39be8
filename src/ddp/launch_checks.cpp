// Refusals of launches and GPU assignments that cannot work, each with its fix.
#include "resnet_ddp/ddp/launch_checks.h"

#include <cerrno>
#include <cstdlib>
#include <map>

#include "resnet_ddp/error.h"

namespace rddp::ddp {

namespace {

std::optional<long> integer_variable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0')
    fail("environment variable ", name, "='", text, "' is not an integer; Slurm sets it to one, "
         "so unset it or correct it before starting resnet_ddp");
  return value;
}

}  // namespace

SlurmTask SlurmTask::from_environment() {
  SlurmTask task;
  task.step_tasks = integer_variable("SLURM_STEP_NUM_TASKS");
  if (!task.step_tasks && std::getenv("SLURM_STEP_ID") != nullptr)
    task.step_tasks = integer_variable("SLURM_NTASKS");
  task.local_id = integer_variable("SLURM_LOCALID");
  return task;
}

void check_slurm_launch(const SlurmTask& task, int world_size, int local_rank) {
  if (!task.step_tasks) return;
  if (*task.step_tasks > world_size)
    fail("Slurm started ", *task.step_tasks, " tasks but MPI sees a job of ", world_size,
         world_size == 1 ? " rank" : " ranks",
         ": srun started the tasks without a PMI interface MPI can use, so each became a job of "
         "its own. Launch with `srun --mpi=pmix ...` (MPICH and Intel MPI also take --mpi=pmi2; "
         "`srun --mpi=list` shows what this Slurm offers), or have the administrators set MpiDefault=pmix in slurm.conf; "
         "alternatively start the ranks with mpirun inside the allocation");
  // Under mpirun inside an allocation, the step is mpirun's daemons (one per node), whose
  // SLURM_LOCALID every rank of the node inherits; only when each rank is a task of the
  // step does SLURM_LOCALID describe the rank.
  if (*task.step_tasks == world_size && task.local_id && *task.local_id != local_rank)
    fail("Slurm says this is local task ", *task.local_id,
         " of its node (SLURM_LOCALID) but MPI places it as local rank ", local_rank,
         " among the ranks sharing the node's memory: the tasks of one node do not see each "
         "other as neighbours, so GPUs would be assigned wrongly. This happens when each task "
         "runs in a container of its own: run one container per node, or share the IPC and "
         "PID namespaces between the tasks' containers");
}

int select_device(int local_rank, int device_count) {
  if (device_count < 1)
    fail("no CUDA device is visible to this rank: check nvidia-smi and CUDA_VISIBLE_DEVICES, "
         "ask Slurm for GPUs (--gpus-per-task=1 or --gres=gpu:N), or run on the CPU with "
         "--device cpu");
  return local_rank % device_count;
}

void check_not_mig(const std::string& device_name, int world_size) {
  if (world_size <= 1) return;
  // CUDA names a MIG instance after its GPU and profile: "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
  if (device_name.find(" MIG ") == std::string::npos && device_name.compare(0, 4, "MIG ") != 0)
    return;
  fail("this rank's GPU is a MIG instance (", device_name, "), and NCCL cannot connect MIG "
       "instances: there is no peer-to-peer access or CUDA IPC between GPU instances. Run the ",
       world_size, " ranks on whole GPUs (ask the administrators for a partition without MIG), "
       "or run one rank on this instance");
}

void check_distinct_gpus(const std::vector<int>& ranks, const std::vector<std::string>& bus_ids,
                         const std::string& host) {
  std::map<std::string, std::vector<int>> ranks_by_gpu;
  for (size_t i = 0; i < bus_ids.size() && i < ranks.size(); ++i)
    ranks_by_gpu[bus_ids[i]].push_back(ranks[i]);
  for (const auto& [bus_id, sharing] : ranks_by_gpu) {
    if (sharing.size() < 2) continue;
    std::string names;
    for (size_t i = 0; i < sharing.size(); ++i)
      names += (i == 0 ? "" : i + 1 == sharing.size() ? " and " : ", ") + std::to_string(sharing[i]);
    fail("ranks ", names, " on ", host, " all use the GPU at PCI bus id ", bus_id,
         ": NCCL needs one rank per GPU. Start at most as many ranks per node as it has GPUs "
         "(Slurm: --ntasks-per-node and --gpus-per-task=1; mpirun: -np or --map-by "
         "ppr:<GPUs>:node), and do not give every task the same CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace rddp::ddp
