// Launch and GPU-assignment refusals, on what Slurm and the ranks would report.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using namespace rddp::ddp;

namespace {

// Sets environment variables for one test and puts the previous values back.
class ScopedEnvironment {
 public:
  void set(const std::string& name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) setenv(name.c_str(), value, 1);
    else unsetenv(name.c_str());
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

SlurmTask task(std::optional<long> step_tasks, std::optional<long> local_id) {
  SlurmTask result;
  result.step_tasks = step_tasks;
  result.local_id = local_id;
  return result;
}

}  // namespace

TEST_CASE("srun without PMI (more Slurm tasks than MPI ranks) is refused with the fix") {
  CHECK_THROWS_WITH_AS(check_slurm_launch(task(4, 2), 1, 0),
                       doctest::Contains("Slurm started 4 tasks but MPI sees a job of 1 rank"), Error);
  CHECK_THROWS_WITH_AS(check_slurm_launch(task(4, 0), 2, 0), doctest::Contains("srun --mpi=pmix"), Error);
  // Not under srun, or a step whose tasks are exactly the ranks: accepted.
  CHECK_NOTHROW(check_slurm_launch(task(std::nullopt, std::nullopt), 8, 3));
  CHECK_NOTHROW(check_slurm_launch(task(4, 3), 4, 3));
}

TEST_CASE("a local rank that disagrees with SLURM_LOCALID is refused, unless mpirun made the step") {
  CHECK_THROWS_WITH_AS(check_slurm_launch(task(4, 1), 4, 0),
                       doctest::Contains("local task 1 of its node (SLURM_LOCALID)"), Error);
  // mpirun inside an allocation: the step is its 2 daemons, whose SLURM_LOCALID (0) every rank
  // of the node inherits; that says nothing about the ranks.
  CHECK_NOTHROW(check_slurm_launch(task(2, 0), 8, 3));
}

TEST_CASE("Slurm's variables are read from the environment, and bad values named") {
  ScopedEnvironment env;
  env.set("SLURM_STEP_NUM_TASKS", "3");
  env.set("SLURM_LOCALID", "1");
  env.set("SLURM_STEP_ID", nullptr);
  env.set("SLURM_NTASKS", "16");
  SlurmTask read = SlurmTask::from_environment();
  CHECK(read.step_tasks == 3);
  CHECK(read.local_id == 1);

  // SLURM_NTASKS outside a step describes the allocation: not read.
  env.set("SLURM_STEP_NUM_TASKS", nullptr);
  CHECK_FALSE(SlurmTask::from_environment().step_tasks.has_value());
  // Inside a step of an older Slurm it is the step's.
  env.set("SLURM_STEP_ID", "0");
  CHECK(SlurmTask::from_environment().step_tasks == 16);

  env.set("SLURM_LOCALID", "one");
  CHECK_THROWS_WITH_AS(SlurmTask::from_environment(), doctest::Contains("SLURM_LOCALID='one'"), Error);
  env.set("SLURM_LOCALID", nullptr);
  env.set("SLURM_STEP_ID", nullptr);
  env.set("SLURM_NTASKS", nullptr);
  read = SlurmTask::from_environment();
  CHECK_FALSE(read.step_tasks.has_value());
  CHECK_FALSE(read.local_id.has_value());
}

TEST_CASE("devices are taken round-robin by local rank") {
  CHECK(select_device(0, 4) == 0);
  CHECK(select_device(3, 4) == 3);
  CHECK(select_device(5, 4) == 1);
  CHECK(select_device(2, 1) == 0);  // --gpus-per-task=1: each rank sees its own GPU as 0
  CHECK_THROWS_WITH_AS(select_device(0, 0), doctest::Contains("no CUDA device is visible"), Error);
}

TEST_CASE("MIG instances are refused for a job of several ranks") {
  CHECK_THROWS_WITH_AS(check_not_mig("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 2),
                       doctest::Contains("MIG instance (NVIDIA A100-SXM4-40GB MIG 1g.5gb)"), Error);
  CHECK_THROWS_WITH_AS(check_not_mig("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 8),
                       doctest::Contains("NCCL cannot connect MIG instances"), Error);
  CHECK_NOTHROW(check_not_mig("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 1));
  CHECK_NOTHROW(check_not_mig("NVIDIA H100 80GB HBM3", 8));
  CHECK_NOTHROW(check_not_mig("NVIDIA A100-SXM4-80GB", 2));
}

TEST_CASE("two ranks of a node on one GPU are refused, naming the ranks and the GPU") {
  const std::vector<int> ranks = {4, 5, 6, 7};
  CHECK_NOTHROW(check_distinct_gpus(ranks, {"0000:1B:00.0", "0000:1C:00.0", "0000:3D:00.0", "0000:3E:00.0"},
                                    "node7"));
  CHECK_THROWS_WITH_AS(
      check_distinct_gpus(ranks, {"0000:1B:00.0", "0000:1C:00.0", "0000:1B:00.0", "0000:3E:00.0"}, "node7"),
      doctest::Contains("ranks 4 and 6 on node7 all use the GPU at PCI bus id 0000:1B:00.0"), Error);
  CHECK_THROWS_WITH_AS(check_distinct_gpus({0, 1, 2}, {"0000:01:00.0", "0000:01:00.0", "0000:01:00.0"}, "a"),
                       doctest::Contains("ranks 0, 1 and 2 on a"), Error);
  CHECK_NOTHROW(check_distinct_gpus({0}, {"0000:01:00.0"}, "a"));
}
