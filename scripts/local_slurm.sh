#!/usr/bin/env bash
# A one-node Slurm on this machine, for the slurm tests and for trying the job scripts:
# munged, slurmctld and slurmd from Debian's packages, on loopback only, with their
# configuration, key, state and logs under one directory. Runs as root (slurmd must be able
# to start tasks as the submitting user). Started directly, not through systemd, so it works
# in containers and on CI machines where systemd is not the init.
#   scripts/local_slurm.sh start    bring it up (nothing to do when it is up); waits until the
#                                   node is idle, or prints the daemons' log tails and fails
#   scripts/local_slurm.sh stop     cancel its jobs, stop the daemons it started
#   scripts/local_slurm.sh status   exit 0 when every daemon runs and the node answers, else 3
#   scripts/local_slurm.sh check    exit 0 when it can be started here, else say why and exit 1
#   scripts/local_slurm.sh env      print the line that points Slurm's commands at it:
#                                     eval "$(scripts/local_slurm.sh env)"; srun -n 2 hostname
# Environment: RDDP_SLURM_DIR (default /tmp/rddp-slurm); RDDP_SLURM_PORT (slurmctld's port,
# slurmd takes the next one; default 16817, away from a site Slurm's 6817);
# RDDP_SLURM_START_TIMEOUT (seconds to wait for an idle node, default 60).
set -euo pipefail

dir=${RDDP_SLURM_DIR:-/tmp/rddp-slurm}
port=${RDDP_SLURM_PORT:-16817}
start_timeout=${RDDP_SLURM_START_TIMEOUT:-60}
conf=$dir/etc/slurm.conf
# Slurm names the node after the short host name: slurmctld refuses to start on a host that
# is not its SlurmctldHost, and slurmd looks itself up by that name.
node=$(hostname -s)
daemons=(munged slurmctld slurmd)

say() { echo "local_slurm.sh: $*" >&2; }
export SLURM_CONF=$conf
# The daemons live in sbin, which a non-login root shell may lack.
PATH=$PATH:/usr/sbin:/sbin

pid_file() { echo "$dir/run/$1.pid"; }

# The pid in the daemon's pid file, if that process is alive and still that daemon (a stale
# file's pid may belong to something else by now).
running_pid() {
  local file pid
  file=$(pid_file "$1")
  [ -r "$file" ] || return 1
  pid=$(tr -dc 0-9 <"$file")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  echo "$pid"
}

# Says why this machine cannot run the local Slurm, if it cannot.
missing_requirements() {
  local missing=() tool
  for tool in munged mungekey munge unmunge slurmctld slurmd srun sinfo scontrol squeue scancel; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "${missing[*]} not installed (scripts/setup.sh, run as root, installs munge, slurmctld," \
      "slurmd and slurm-client)"
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: munged and slurmd must run as root (start it once with" \
      "sudo scripts/local_slurm.sh start; the tests then use it as any user)"
    return 1
  fi
}

write_config() {
  local cpus
  cpus=$(nproc)
  mkdir -p "$dir/etc"
  cat >"$conf" <<EOF
# Written by scripts/local_slurm.sh: a one-node Slurm on loopback for tests. Rewritten at
# every start; edit the script, not this file.
ClusterName=rddp-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Our own munged on our own socket, so a site munged (or none) does not matter. A requeued job
# may start again after cred_expire seconds (default 120): 10 keeps the requeue tests short.
AuthInfo=socket=$dir/munge/munge.socket.2,cred_expire=10
StateSaveLocation=$dir/state/slurmctld
SlurmdSpoolDir=$dir/state/slurmd
SlurmctldPidFile=$(pid_file slurmctld)
SlurmdPidFile=$(pid_file slurmd)
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: containers and CI runners often have no writable cgroup tree, and nothing here
# needs confinement. Processes are tracked through their parent links instead.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Look for jobs to start every second (defaults: 60 s and 30 s), so that a requeued test job
# starts as soon as it may.
SchedulerParameters=sched_interval=1,bf_interval=1
# srun starts Open MPI ranks through PMIx: Debian's Open MPI 4.1 is built against the same
# PMIx 4 library as Slurm's mpi_pmix_v4 plugin, and MPI_Init then finds its rank and the
# world size from the step with no mpirun in between. (pmi2 would need Open MPI's s2
# component, which Debian does not build.)
MpiDefault=pmix
# A node that went down (say, slurmd killed with a job on it) returns when slurmd is back.
ReturnToService=2
# Seconds between SIGTERM and SIGKILL when a job or step is ended: Slurm's default, which is
# the time a program has to checkpoint on scancel, as on most clusters.
KillWait=30
# The node is described as nproc CPUs; accept that even if slurmd counts the hardware
# differently (a container's CPU set is smaller than the host's).
SlurmdParameters=config_overrides
# One GPU per CPU, each a link to /dev/null (gres.conf), so that job scripts which ask for
# GPUs (--gpus-per-node) are scheduled, and see CUDA_VISIBLE_DEVICES, as on a GPU cluster.
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  # Slurm wants a device file per GPU and takes its index from the number in the name.
  mkdir -p "$dir/dev"
  local gpu
  for ((gpu = 0; gpu < cpus; gpu++)); do ln -sfn /dev/null "$dir/dev/gpu$gpu"; done
  echo "Name=gpu File=$dir/dev/gpu[0-$((cpus - 1))]" >"$dir/etc/gres.conf"
}

print_log_tails() {
  local log
  for log in "$dir"/log/*.log; do
    [ -s "$log" ] || continue
    say "--- last lines of $log"
    tail -n 25 "$log" >&2
  done
}

# Polls `$@` five times a second for up to $1 seconds.
wait_for() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

node_idle() { [ "$(sinfo -h -N -n "$node" -o %T 2>/dev/null)" = idle ]; }
node_answers() {
  case $(sinfo -h -N -n "$node" -o %T 2>/dev/null) in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
  esac
}
no_jobs() { [ -z "$(squeue -h -o %i 2>/dev/null)" ]; }
munge_answers() { munge -n -S "$dir/munge/munge.socket.2" </dev/null | unmunge -S "$dir/munge/munge.socket.2"; }

all_up() {
  local daemon
  for daemon in "${daemons[@]}"; do running_pid "$daemon" >/dev/null || return 1; done
  node_answers
}

# Each daemon forks into the background; its descriptors are closed here so that it holds
# neither our lock nor the pipe of whoever ran us (ctest would wait on that pipe forever).
start_daemons() {
  mkdir -p "$dir/run" "$dir/log" "$dir/state/slurmctld" "$dir/state/slurmd" "$dir/munge"
  chmod 0755 "$dir" "$dir/munge"
  if [ ! -s "$dir/munge/munge.key" ]; then
    mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null
  fi
  chmod 0600 "$dir/munge/munge.key"
  write_config

  munged --socket="$dir/munge/munge.socket.2" --key-file="$dir/munge/munge.key" \
    --pid-file="$(pid_file munged)" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" </dev/null >>"$dir/log/munged.log" 2>&1 9>&-
  wait_for 15 munge_answers || { say "munged did not answer on $dir/munge/munge.socket.2"; return 1; }

  # -c: start from a clean state; the cluster holds only throw-away test jobs.
  slurmctld -c -f "$conf" </dev/null >>"$dir/log/slurmctld.log" 2>&1 9>&-
  wait_for 30 scontrol ping || { say "slurmctld did not answer on port $port"; return 1; }

  slurmd -c -f "$conf" -N "$node" </dev/null >>"$dir/log/slurmd.log" 2>&1 9>&-
  wait_for "$start_timeout" node_idle ||
    { say "node $node not idle after ${start_timeout}s: $(sinfo -h -N -o '%N %T %E' 2>&1)"; return 1; }
}

# Exited: no such process, or a zombie that init has not reaped yet.
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

stop_daemons() {
  if running_pid slurmctld >/dev/null; then
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      wait_for 40 no_jobs || say "jobs still ending: $jobs"  # KillWait is 30 s
    fi
  fi
  local daemon pid
  for daemon in slurmd slurmctld munged; do
    pid=$(running_pid "$daemon") || { rm -f "$(pid_file "$daemon")"; continue; }
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for 15 gone "$pid"; then
      say "$daemon ($pid) ignored SIGTERM for 15 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$(pid_file "$daemon")"
  done
}

start() {
  local reason
  reason=$(missing_requirements) || { say "cannot start Slurm here: $reason"; return 1; }
  if all_up; then
    say "already up ($dir)"
    return 0
  fi
  # Something half up (a daemon died, a machine was restarted): start again from nothing.
  stop_daemons
  local began=$SECONDS
  if ! start_daemons; then
    print_log_tails
    stop_daemons
    say "could not start Slurm; configuration and logs are in $dir"
    return 1
  fi
  say "up in $((SECONDS - began)) s: node $node, $(nproc) CPUs, SLURM_CONF=$conf"
}

stop() {
  stop_daemons
  say "stopped ($dir keeps the configuration and logs)"
}

status() {
  local daemon pid up=0
  for daemon in "${daemons[@]}"; do
    if pid=$(running_pid "$daemon"); then
      echo "$daemon: running (pid $pid)"
    else
      echo "$daemon: not running"
      up=3
    fi
  done
  if [ $up -eq 0 ]; then
    sinfo -N -o '%N %P %T %c' 2>&1 || up=3
    node_answers || up=3
  fi
  return $up
}

command=${1:-}
case $command in
  start | stop)
    mkdir -p "$dir"
    exec 9>"$dir/lock"
    flock 9
    $command
    ;;
  status) status ;;
  check)
    reason=$(missing_requirements) || { echo "$reason"; exit 1; }
    ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *)
    say "usage: $0 start|stop|status|check|env"
    exit 2
    ;;
esac
