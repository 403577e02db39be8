// Start-up over MPI: the ranks, where they run, and the checks of how they were launched.
#include "resnet_ddp/ddp/context.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <vector>

#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/mpi_check.h"
#include "resnet_ddp/ddp/thread_budget.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/host_name.h"

namespace rddp::ddp {

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
  }
}

// Nodes in the job: each node's communicator has one rank 0.
int count_nodes(MPI_Comm world, MPI_Comm node) {
  int local_rank = 0;
  RDDP_MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  int leader = local_rank == 0 ? 1 : 0, nodes = 0;
  RDDP_MPI_CHECK(MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, world));
  return nodes;
}

}  // namespace

DistributedContext::DistributedContext(int* argc, char*** argv) {
  int initialized = 0;
  RDDP_MPI_CHECK(MPI_Initialized(&initialized));
  RDDP_ASSERT(!initialized);  // one context per process: MPI starts once
  RDDP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
  // Errors come back as codes, so each becomes an Error with its call and the rank's prefix.
  RDDP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  RDDP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_));
  RDDP_MPI_CHECK(MPI_Comm_rank(world_, &rank_));
  RDDP_MPI_CHECK(MPI_Comm_size(world_, &world_size_));
  host_ = host_name();
  set_process_identity(rank_, world_size_, host_, thread_level_ == MPI_THREAD_MULTIPLE);
  install_termination_message();

  RDDP_MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_));
  RDDP_MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN));
  RDDP_MPI_CHECK(MPI_Comm_rank(node_, &local_rank_));
  RDDP_MPI_CHECK(MPI_Comm_size(node_, &local_size_));
  nodes_ = count_nodes(world_, node_);

  check_slurm_launch(SlurmTask::from_environment(), world_size_, local_rank_);

  // Every rank of the node shares its affinity mask, so each knows who else runs on its CPUs.
  CpuMask mine = current_affinity();
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(local_size_));
  RDDP_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                               static_cast<int>(mine.size()), MPI_UINT64_T, node_));
  std::vector<CpuMask> masks;
  for (int r = 0; r < local_size_; ++r)
    masks.emplace_back(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size());
  const int share = openmp_thread_share(masks, local_rank_);
  if (const char* set = std::getenv("OMP_NUM_THREADS"); set != nullptr && *set != '\0') {
    openmp_threads_ = omp_get_max_threads();
    openmp_reason_ = std::string("OMP_NUM_THREADS=") + set;
  } else {
    openmp_threads_ = share;
    omp_set_num_threads(share);
    openmp_reason_ = std::to_string(count_cpus(mine)) + " CPUs in this rank's affinity mask, " +
                     std::to_string(local_size_) + (local_size_ == 1 ? " rank" : " ranks") +
                     " on the node; set OMP_NUM_THREADS to choose";
  }
}

DistributedContext::~DistributedContext() {
  // An error on its way to fatal_abort(), which ends the job: MPI_Finalize would wait for
  // ranks that may never arrive.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&node_);
  MPI_Comm_free(&world_);
  MPI_Finalize();
}

std::string DistributedContext::prefix() const {
  return "[rank " + std::to_string(rank_) + "/" + std::to_string(world_size_) + " " + host_ + "]";
}

std::string DistributedContext::describe() const {
  return std::to_string(world_size_) + (world_size_ == 1 ? " rank" : " ranks") + " on " +
         std::to_string(nodes_) + (nodes_ == 1 ? " node" : " nodes") + ", MPI thread level " +
         thread_level_name(thread_level_) + ", " + std::to_string(openmp_threads_) +
         (openmp_threads_ == 1 ? " OpenMP thread" : " OpenMP threads") + " per rank (" + openmp_reason_ + ")";
}

}  // namespace rddp::ddp
