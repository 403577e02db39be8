# shellcheck shell=bash
# Sourced by the PBS job scripts: pbs_ranks reads the job's allocation and sets what the
# training step needs: ranks (one per line of $PBS_NODEFILE, that is one per mpiprocs of each
# chunk: ask for mpiprocs equal to ngpus), ranks_per_node, nodes, workers (each rank's share of
# the node's NCPUS, for its data loader threads) and launcher (mpirun with its flags).
# Environment: MPIRUN (default mpirun), MPIRUN_FLAGS (more flags for it).

say() { echo "$(date +%T) $*"; }

pbs_ranks() {
  [ -x build/resnet_ddp ] ||
    { say "no build/resnet_ddp in $PWD: submit from the built source tree"; return 1; }
  [ -s "${PBS_NODEFILE:-}" ] ||
    { say "PBS_NODEFILE ('${PBS_NODEFILE:-}') names no file of hosts: submit with qsub"; return 1; }
  ranks=$(wc -l <"$PBS_NODEFILE")
  local hosts first
  hosts=$(awk '!seen[$0]++' "$PBS_NODEFILE")
  nodes=$(wc -l <<<"$hosts")
  first=$(head -n 1 <<<"$hosts")
  ranks_per_node=$(grep -cxF "$first" "$PBS_NODEFILE")
  if [ $((ranks_per_node * nodes)) != "$ranks" ]; then
    say "PBS_NODEFILE lists $ranks ranks on $nodes hosts, not as many on each: ask for chunks" \
      "alike (select=N:ncpus=C:ngpus=G:mpiprocs=G)"
    return 1
  fi
  # PBS's cgroup hook shows a job its own GPUs; every rank of a node takes one by local rank.
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    local gpus
    gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
    if [ "$gpus" != "$ranks_per_node" ]; then
      say "PBS_NODEFILE lists $ranks_per_node ranks on $first, which has $gpus GPUs" \
        "(CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES): ask for one rank per GPU, mpiprocs" \
        "equal to ngpus (select=$nodes:ncpus=C:ngpus=$gpus:mpiprocs=$gpus)"
      return 1
    fi
  fi
  workers=$(( ${NCPUS:-$(nproc)} / ranks_per_node ))
  [ "$workers" -ge 1 ] || workers=1
  # PBS sets OMP_NUM_THREADS to the chunk's ncpus, which every rank of the node would take.
  export OMP_NUM_THREADS=$workers
  MPIRUN=${MPIRUN:-mpirun}
  if ! command -v "$MPIRUN" >/dev/null; then
    say "no $MPIRUN: load the MPI resnet_ddp was built with (module load ...) or set MPIRUN"
    return 1
  fi
  launcher=("$MPIRUN" -np "$ranks" -machinefile "$PBS_NODEFILE")
  if "$MPIRUN" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    # Open MPI binds each rank to one core, where its loader threads would queue. On SIGTERM it
    # gives the ranks 1 s before SIGKILL, too short for a checkpoint: 10 s, PBS's own default
    # kill_delay (it waits twice that long whenever a rank exits non-zero, 75 included, so
    # more would eat into TIME_MARGIN). It passes the environment to other nodes only where
    # told to.
    launcher+=(--bind-to none --mca odls_base_sigkill_timeout 10)
    local name
    for name in PATH LD_LIBRARY_PATH OMP_NUM_THREADS; do
      [ -z "${!name+set}" ] || launcher+=(-x "$name")
    done
  fi
  # shellcheck disable=SC2206  # a list of flags
  launcher+=(${MPIRUN_FLAGS:-})
  say "$ranks ranks on $nodes node(s) ($ranks_per_node each, $workers loader threads each)"
}
