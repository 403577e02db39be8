#pragma once
// The job's ranks, found once at start-up over MPI, however the processes were started:
//   srun ./resnet_ddp ...          (Slurm with PMIx or PMI2: srun --mpi=pmix, or MpiDefault)
//   mpirun -np 8 ./resnet_ddp ...  (any MPI launcher)
//   ./resnet_ddp ...               (no launcher: an MPI singleton, world size 1)
// No MASTER_ADDR/MASTER_PORT: the MPI launcher already connects the ranks, and NCCL's unique
// id travels over MPI. Build exactly one, first thing in main(), and destroy it last.
#include <mpi.h>

#include <string>

namespace rddp::ddp {

class DistributedContext {
 public:
  // MPI_Init_thread asking for MPI_THREAD_MULTIPLE: the watchdog thread must be able to call
  // MPI_Abort while the main thread is blocked inside MPI_Wait, which lower levels forbid.
  // Then: rank and world size; the local rank among the ranks sharing this node
  // (MPI_Comm_split_type SHARED), checked against Slurm's view (check_slurm_launch); the
  // OpenMP thread cap (thread_budget.h); the rank prefix and SIGTERM message of the fatal path.
  // Throws Error (on every rank that sees the problem) with the fix.
  DistributedContext(int* argc, char*** argv);
  // MPI_Finalize, except while an exception propagates: then MPI stays up for fatal_abort(),
  // since MPI_Finalize would wait for ranks that may never arrive. So main() may hold the
  // context inside the try block whose handler calls fatal_abort().
  ~DistributedContext();
  DistributedContext(const DistributedContext&) = delete;
  DistributedContext& operator=(const DistributedContext&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this node
  int local_size() const { return local_size_; }  // ranks on this node
  int nodes() const { return nodes_; }
  const std::string& host() const { return host_; }
  std::string prefix() const;  // "[rank r/W host]"

  // A duplicate of MPI_COMM_WORLD, and the ranks on this node; both return MPI errors.
  MPI_Comm world() const { return world_; }
  MPI_Comm node() const { return node_; }

  // MPI's thread level: MPI_THREAD_MULTIPLE unless the library offers less.
  int thread_level() const { return thread_level_; }
  // OpenMP threads this rank computes with, and why (the settings table shows it).
  int openmp_threads() const { return openmp_threads_; }
  const std::string& openmp_reason() const { return openmp_reason_; }

  // One line for the settings table: ranks, nodes, launcher, MPI thread level, OpenMP threads.
  std::string describe() const;

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1, nodes_ = 1;
  int thread_level_ = MPI_THREAD_SINGLE;
  int openmp_threads_ = 1;
  std::string openmp_reason_;
  std::string host_;
  MPI_Comm world_ = MPI_COMM_NULL, node_ = MPI_COMM_NULL;
};

}  // namespace rddp::ddp
