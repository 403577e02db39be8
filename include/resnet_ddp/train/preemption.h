#pragma once
// SIGUSR1 and SIGTERM (Slurm's --signal, scancel, preemption) only raise a flag; the training
// loop looks at it between steps, all ranks agree, rank 0 checkpoints and the job exits with
// kExitPreempted so the job script can requeue it.
#include <string>

namespace rddp {

inline constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: try again later

// `prefix` ("[rank r/W host]") starts the line each handler prints when its signal arrives.
void install_preemption_handlers(const std::string& prefix);
bool preemption_requested();
int preemption_signal();  // the signal that asked, 0 if none

}  // namespace rddp
