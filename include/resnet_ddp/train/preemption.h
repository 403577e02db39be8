#pragma once
// SIGUSR1 and SIGTERM (Slurm's --signal, scancel, preemption) only raise a flag; the trainer
// looks at it after every training step and evaluation batch, and while rank 0 lists the data;
// all ranks agree, rank 0 checkpoints and the job exits with kExitPreempted so the job script
// can requeue it. Slurm's KillWait (30 s by default) is all the time there is.
#include <string>

#include "resnet_ddp/error.h"

namespace rddp {

inline constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: try again later

// `prefix` ("[rank r/W host]") starts the line each handler prints when its signal arrives.
void install_preemption_handlers(const std::string& prefix);
bool preemption_requested();
int preemption_signal();  // the signal that asked, 0 if none
// "SIGUSR1", "SIGTERM", or "on another rank" where this rank got none.
std::string preemption_cause();

// Thrown on every rank at once when a preemption request stops the run before it has anything
// to checkpoint (while rank 0 lists the data); run_training returns kExitPreempted.
class PreemptedAtStart : public Error {
 public:
  using Error::Error;
};

}  // namespace rddp
