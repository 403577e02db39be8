#pragma once
// SIGUSR1 and SIGTERM (Slurm's --signal, scancel, preemption) only raise a flag; the training
// loop looks at it between steps, all ranks agree, rank 0 checkpoints and the job exits with
// kExitPreempted so the job script can requeue it.
namespace rddp {

inline constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: try again later

void install_preemption_handlers();
bool preemption_requested();
int preemption_signal();  // the signal that asked, 0 if none

}  // namespace rddp
