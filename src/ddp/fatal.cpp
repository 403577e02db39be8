// The fatal path: one message with the rank prefix, communicators aborted, the whole job ended.
#include "resnet_ddp/ddp/fatal.h"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/host_name.h"

namespace rddp::ddp {

namespace {

std::mutex identity_mutex;
std::string identity_prefix;  // empty until the bootstrap sets it
bool any_thread_may_call_mpi = false;

std::mutex abortables_mutex;
std::vector<Comm*> abortables;

std::atomic<bool> fatal_started{false};

// Written before the handler is installed and only read inside it: a signal handler may not
// build strings.
char termination_text[512];

extern "C" void print_termination_and_reraise(int signal_number) {
  const ssize_t ignored = write(STDERR_FILENO, termination_text, std::strlen(termination_text));
  (void)ignored;
  // The default action ends the process with the signal's status, as the launcher expects.
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

std::string rank_prefix() {
  std::lock_guard<std::mutex> lock(identity_mutex);
  if (!identity_prefix.empty()) return identity_prefix;
  return "[" + host_name() + "]";
}

void set_process_identity(int rank, int world_size, const std::string& host, bool mpi_any_thread) {
  std::lock_guard<std::mutex> lock(identity_mutex);
  identity_prefix = "[rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " " + host + "]";
  any_thread_may_call_mpi = mpi_any_thread;
  std::snprintf(termination_text, sizeof termination_text,
                "%s terminated by SIGTERM: the launcher is ending the job, most often because "
                "another rank failed (its message comes first), or because the job was "
                "cancelled or reached its time limit\n",
                identity_prefix.c_str());
}

void install_termination_message() {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0) return;
  const bool has_own_handler = (current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL;
  if (has_own_handler) return;
  struct sigaction action {};
  action.sa_handler = print_termination_and_reraise;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

void register_abortable(Comm* comm) {
  std::lock_guard<std::mutex> lock(abortables_mutex);
  abortables.push_back(comm);
}

void unregister_abortable(Comm* comm) {
  std::lock_guard<std::mutex> lock(abortables_mutex);
  abortables.erase(std::remove(abortables.begin(), abortables.end(), comm), abortables.end());
}

void fatal_abort(const std::string& message, int exit_code) {
  const std::string line = rank_prefix() + " " + message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
  if (fatal_started.exchange(true)) {
    // Another thread is already ending the process; its MPI_Abort takes this thread too.
    for (;;) pause();
  }

  {
    // A thread that holds the lock is only adding or removing an entry; waiting is safe.
    std::lock_guard<std::mutex> lock(abortables_mutex);
    for (Comm* comm : abortables) {
      try {
        comm->abort();
      } catch (const std::exception& error) {
        std::fprintf(stderr, "%s while aborting the %s communicator: %s\n", rank_prefix().c_str(),
                     comm->backend(), error.what());
      }
    }
  }

  if (exit_code == 0) exit_code = 1;
  if (mpi_running()) {
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    bool any_thread;
    {
      std::lock_guard<std::mutex> lock(identity_mutex);
      any_thread = any_thread_may_call_mpi;
    }
    if (any_thread || is_main) MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  // No MPI, or a thread that may not call it: a process that ends without MPI_Finalize makes
  // mpirun and srun end the other ranks.
  std::_Exit(exit_code);
}

}  // namespace rddp::ddp
