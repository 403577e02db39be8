#pragma once
// Ending a job that cannot go on. A rank that stops on its own leaves the others blocked in
// their next collective, so the whole job ends together: the failing rank prints its message
// with its "[rank r/W host]" prefix, aborts its communicators so no thread stays stuck in
// NCCL, and calls MPI_Abort, which makes the launcher end every rank. The trainer's main()
// catches every exception and calls fatal_abort(); never plain exit() on one rank.
#include <string>

#include "resnet_ddp/error.h"

namespace rddp::ddp {

class Comm;

// An error that every rank raises at the same point for the same reason, after a collective
// check (e.g. ranks that disagree on the number of steps). Each rank has its message, so
// main() may print it and return non-zero normally: no MPI_Abort that could kill the other
// ranks before they print theirs.
class AllRanksError : public Error {
 public:
  using Error::Error;
};

// "[rank r/W host]" once the job's ranks are known, "[host]" before.
std::string rank_prefix();

// Prints "<prefix> <message>" to stderr, aborts every registered communicator and ends the
// whole job with MPI_Abort(exit_code) (or _Exit where MPI is not running). Safe to call from
// any thread: when two threads fail at once, the second prints its message and waits for the
// first to end the process.
[[noreturn]] void fatal_abort(const std::string& message, int exit_code = 1);

// Communicators that fatal_abort() must abort first (NCCL: ncclCommAbort, which releases
// threads blocked in the communicator). A communicator registers itself for its lifetime.
void register_abortable(Comm* comm);
void unregister_abortable(Comm* comm);

// Set by the bootstrap: the identity in the prefix, and whether MPI may be called from any
// thread (MPI_THREAD_MULTIPLE); without that, a watchdog thread cannot call MPI_Abort and
// ends its process with _Exit, which the launcher turns into the end of the job.
void set_process_identity(int rank, int world_size, const std::string& host, bool mpi_any_thread);

// Makes SIGTERM print "<prefix> terminated by SIGTERM: ..." before the process ends, so that
// when the launcher ends the job because another rank failed (or Slurm cancels it), every
// rank says why it stopped. Leaves a SIGTERM handler the program installed itself alone.
void install_termination_message();

}  // namespace rddp::ddp
