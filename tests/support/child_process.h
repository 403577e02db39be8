#pragma once
// Runs part of a test in a forked child: for what must end a process (a signal, a fatal-error
// path, a sanitizer's report) or must be measured in one of its own (peak memory).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

namespace rddp::testing {

struct ChildResult {
  int status = 0;      // as waitpid gives it
  std::string output;  // stdout and stderr together
};

// `body` runs in the child with stdout and stderr going to the parent; the child exits with
// status 0 when body returns.
template <typename Body>
ChildResult run_in_child(Body body) {
  int pipe_ends[2];
  REQUIRE(pipe(pipe_ends) == 0);
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(pipe_ends[0]);
    dup2(pipe_ends[1], STDOUT_FILENO);
    dup2(pipe_ends[1], STDERR_FILENO);
    body();
    std::fflush(nullptr);
    _exit(0);
  }
  close(pipe_ends[1]);
  ChildResult result;
  char buffer[512];
  for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof buffer)) > 0;)
    result.output.append(buffer, static_cast<size_t>(n));
  close(pipe_ends[0]);
  REQUIRE(waitpid(child, &result.status, 0) == child);
  return result;
}

}  // namespace rddp::testing
