#include "resnet_ddp/train/preemption.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>

namespace rddp {

namespace {

volatile std::sig_atomic_t requested_signal = 0;
// Written by the handler with write(2), the only output a signal handler may do; filled in
// beforehand because building a string is not allowed there.
char usr1_message[512], term_message[512];

extern "C" void on_preemption_signal(int signal) {
  requested_signal = signal;
  const char* message = signal == SIGUSR1 ? usr1_message : term_message;
  const ssize_t ignored = write(STDERR_FILENO, message, std::strlen(message));
  (void)ignored;
}

void prepare(char* buffer, const std::string& text) {
  std::strncpy(buffer, text.c_str(), 511);
  buffer[511] = '\0';
}

}  // namespace

void install_preemption_handlers(const std::string& prefix) {
  const std::string plan =
      ": stopping after the step or evaluation batch in progress, with a checkpoint when "
      "--checkpoint-dir is set";
  prepare(usr1_message, prefix + " received SIGUSR1" + plan + "\n");
  // A launcher also sends SIGTERM when it ends the job because another rank failed; that
  // rank's own message says why, and this rank may be stopped before the next step.
  prepare(term_message, prefix + " received SIGTERM" + plan +
                            " (if another rank failed, the launcher is ending the job: see its message)\n");
  struct sigaction action = {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads in the loader carry on
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool preemption_requested() { return requested_signal != 0; }
int preemption_signal() { return requested_signal; }

std::string preemption_cause() {
  const int signal = requested_signal;
  return signal == 0 ? "on another rank" : signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
}

}  // namespace rddp
