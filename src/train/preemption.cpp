#include "resnet_ddp/train/preemption.h"

#include <csignal>

namespace rddp {

namespace {

volatile std::sig_atomic_t requested_signal = 0;

extern "C" void on_preemption_signal(int signal) { requested_signal = signal; }

}  // namespace

void install_preemption_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads in the loader carry on
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool preemption_requested() { return requested_signal != 0; }
int preemption_signal() { return requested_signal; }

}  // namespace rddp
