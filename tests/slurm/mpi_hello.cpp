// Shows where each MPI rank runs and checks that MPI and Slurm agree on the job, which is what
// `srun --mpi=pmix` must achieve: without PMIx wiring every rank would be a world of one.
//   mpi_hello                       each rank prints one line; every rank exits 1 when MPI's
//                                   rank or world size differs from Slurm's
//   mpi_hello --exit-on-rank R C    rank R exits with status C straight after MPI_Init, while
//                                   the others wait in a barrier that cannot complete: only
//                                   the launcher can end such a step
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// The value of a Slurm variable as a number, or -1 when it is absent (not started by srun).
long slurm_number(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::strtol(value, nullptr, 10) : -1;
}

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--exit-on-rank RANK STATUS]\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int failing_rank = -1, failing_status = 0;
  if (argc == 4 && std::strcmp(argv[1], "--exit-on-rank") == 0) {
    failing_rank = std::atoi(argv[2]);
    failing_status = std::atoi(argv[3]);
  } else if (argc != 1) {
    return usage(argv[0]);
  }

  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {};
  gethostname(host, sizeof host - 1);

  const long procid = slurm_number("SLURM_PROCID");
  const long localid = slurm_number("SLURM_LOCALID");
  const long ntasks = slurm_number("SLURM_NTASKS");
  // A sum over the world proves the ranks can talk, not only that PMIx told them the size.
  int one = 1, ranks_reached = 0;
  MPI_Allreduce(&one, &ranks_reached, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d on %s: SLURM_PROCID=%ld SLURM_LOCALID=%ld SLURM_NTASKS=%ld, "
              "allreduce reached %d ranks\n",
              rank, size, host, procid, localid, ntasks, ranks_reached);
  std::fflush(stdout);

  if (rank == failing_rank) {
    std::fprintf(stderr, "rank %d: exiting with status %d without MPI_Finalize\n", rank,
                 failing_status);
    std::_Exit(failing_status);
  }
  if (failing_rank >= 0) {
    MPI_Barrier(MPI_COMM_WORLD);  // never completes: one rank has gone
  }

  bool ok = true;
  if (ntasks < 0 || procid < 0) {
    std::fprintf(stderr, "rank %d: SLURM_NTASKS or SLURM_PROCID is not set; start this with srun\n",
                 rank);
    ok = false;
  } else if (size != ntasks || rank != procid || ranks_reached != size) {
    std::fprintf(stderr,
                 "rank %d: MPI sees rank %d of %d (allreduce reached %d) but Slurm started task "
                 "%ld of %ld; srun did not wire MPI up (try srun --mpi=pmix)\n",
                 rank, rank, size, ranks_reached, procid, ntasks);
    ok = false;
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
