// The fatal path in a child process: the message with the rank prefix, the communicators
// aborted, the exit status; and the SIGTERM message that every rank prints when the launcher
// ends the job.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/fatal.h"
#include "support/child_process.h"

using namespace rddp;
using namespace rddp::ddp;
using testing::ChildResult;
using testing::run_in_child;

namespace {

// Says on stdout that it was aborted, so the parent can see the fatal path reached it.
class AbortRecordingComm final : public Comm {
 public:
  const char* backend() const override { return "recording"; }
  DeviceKind memory() const override { return DeviceKind::cpu; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::shared_ptr<CommRequest> start_allreduce(void*, size_t, DataType, Reduction, const std::string&) override {
    return nullptr;
  }
  std::shared_ptr<CommRequest> start_broadcast(void*, size_t, int, const std::string&) override { return nullptr; }
  std::shared_ptr<CommRequest> start_barrier(const std::string&) override { return nullptr; }
  void abort() override {
    std::fputs("communicator aborted\n", stdout);
    std::fflush(stdout);
  }
};

}  // namespace

TEST_CASE("fatal_abort prints the rank prefix, aborts registered communicators and exits non-zero") {
  const ChildResult result = run_in_child([] {
    set_process_identity(2, 4, "node17", true);
    AbortRecordingComm registered, unregistered;
    register_abortable(&registered);
    register_abortable(&unregistered);
    unregister_abortable(&unregistered);
    fatal_abort("cannot open /data/train: No such file or directory", 7);
  });
  REQUIRE(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) == 7);
  CHECK(result.output.find("[rank 2/4 node17] cannot open /data/train: No such file or directory\n") !=
        std::string::npos);
  // Exactly one communicator was aborted: the one still registered.
  const size_t first = result.output.find("communicator aborted");
  CHECK(first != std::string::npos);
  CHECK(result.output.find("communicator aborted", first + 1) == std::string::npos);
}

TEST_CASE("fatal_abort never ends a process with status 0") {
  const ChildResult result = run_in_child([] { fatal_abort("an error with code 0", 0); });
  REQUIRE(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) != 0);
}

TEST_CASE("SIGTERM prints why the rank stops, then ends the process by SIGTERM") {
  const ChildResult result = run_in_child([] {
    signal(SIGTERM, SIG_DFL);  // doctest reports signals with handlers of its own
    set_process_identity(1, 2, "node3", true);
    install_termination_message();
    raise(SIGTERM);
    std::puts("still running after SIGTERM");
  });
  REQUIRE(WIFSIGNALED(result.status));
  CHECK(WTERMSIG(result.status) == SIGTERM);
  CHECK(result.output.rfind("[rank 1/2 node3] terminated by SIGTERM: the launcher is ending the job", 0) == 0);
  CHECK(result.output.find("still running") == std::string::npos);
}

TEST_CASE("a SIGTERM handler the program installed itself is left alone") {
  const ChildResult result = run_in_child([] {
    signal(SIGTERM, [](int) { std::_Exit(42); });
    set_process_identity(0, 1, "node1", true);
    install_termination_message();
    raise(SIGTERM);
  });
  REQUIRE(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) == 42);
  CHECK(result.output.find("terminated by SIGTERM") == std::string::npos);
}

TEST_CASE("an error every rank raises together is still an Error") {
  try {
    throw AllRanksError("the ranks disagree");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) == "the ranks disagree");
  }
}
