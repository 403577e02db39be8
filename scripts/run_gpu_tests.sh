#!/usr/bin/env bash
# Runs the GPU test program so that one broken case cannot take the rest of the run with it:
#
#   scripts/run_gpu_tests.sh [--stall SECONDS] [--restarts N] PROGRAM [DOCTEST OPTIONS...]
#
# PROGRAM is build/tests/gpu_tests (or the emulated engine tests); the options go to it as they
# are (--test-case=..., --source-file=...). Three things end a GPU test process early, and each
# would otherwise lose every case after it:
#   - a case leaves the CUDA context unusable (an illegal address, a device-side assert): the
#     program notices after the case, says so and exits with status 3 (tests/gpu/case_record.cpp);
#   - a case crashes the process (a signal);
#   - a case hangs: no case has ended for --stall seconds (default 240; the whole suite took
#     290 s on an H100 on 2026-11-27), and the process is killed.
# Each time, the cases after the one at fault run again in a new process (doctest's --first), at
# most --restarts times (default 5). The output is the processes' own, one after another, then
# the eight longest cases, and, after any of the three, a line per case that failed and a summary
# line in doctest's form over every process. Exit status: 0 when every case ran and passed, 77
# when the program found no GPU (it prints SKIPPED), else 1.
set -uo pipefail
stall=240 restarts=5
while [ $# -gt 0 ]; do
  case $1 in
    --stall) stall=${2:?--stall needs seconds}; shift ;;
    --restarts) restarts=${2:?--restarts needs a number}; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
  shift
done
[[ $stall =~ ^[1-9][0-9]*$ ]] || { echo "run_gpu_tests.sh: --stall needs whole seconds, got '$stall'" >&2; exit 2; }
[[ $restarts =~ ^[0-9]+$ ]] || { echo "run_gpu_tests.sh: --restarts needs a number, got '$restarts'" >&2; exit 2; }
[ $# -ge 1 ] || { echo "run_gpu_tests.sh: name the GPU test program; see $0 --help" >&2; exit 2; }
program=$1
shift
[ -x "$program" ] || { echo "run_gpu_tests.sh: $program is not an executable; build it first (scripts/test.sh)" >&2; exit 2; }

work=$(mktemp -d)
record=$work/record
: >"$record"
pid="" tail_pid=""
# end_process PID: TERM, and KILL when it is still there 5 s later.
end_process() {
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.5
  done
  kill -KILL "$1" 2>/dev/null
}
stop_children() {
  [ -z "$pid" ] || end_process "$pid"
  [ -z "$tail_pid" ] || kill "$tail_pid" 2>/dev/null
}
# A time limit around this script (timeout, ctest) must not leave a test process on the GPU.
trap 'stop_children; rm -rf "$work"; exit 124' TERM INT
trap 'rm -rf "$work"' EXIT

# Records of case INDEX and later are the current process's; the last line is its last case.
last_index() { tail -n 1 "$record" | cut -f1; }
last_outcome() { tail -n 1 "$record" | cut -f2; }
# name_of INDEX OPTIONS...: the name of case INDEX among those the options pass.
name_of() {
  local index=$1
  shift
  "$program" "$@" --list-test-cases --first="$index" --last="$index" 2>/dev/null |
    awk '/listing all test case names/ { listing = 1; next } listing && !/^=+$/ { print; exit }'
}
# count_of OPTIONS...: how many cases the options pass (--first and --last do not change it).
count_of() {
  "$program" "$@" --count 2>/dev/null | grep -o 'passing the current filters: [0-9]*' | grep -o '[0-9]*$'
}

first=1 processes=0 status=0
faults=()
while :; do
  processes=$((processes + 1))
  args=("$@")
  [ "$first" -le 1 ] || args+=(--first="$first")
  log=$work/process$processes.log
  : >"$log"
  [ $processes = 1 ] || echo "== gpu tests from case $first on, in a new process"
  RDDP_GPU_TEST_RECORD=$record "$program" "${args[@]}" >"$log" 2>&1 &
  pid=$!
  tail -n +1 -f --pid="$pid" "$log" &
  tail_pid=$!
  lines=$(wc -l <"$record") quiet=0 hung=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    now=$(wc -l <"$record")
    if [ "$now" != "$lines" ]; then lines=$now quiet=0; else quiet=$((quiet + 1)); fi
    if [ $quiet -ge "$stall" ]; then
      hung=1
      end_process "$pid"
      break
    fi
  done
  wait "$pid"
  status=$?
  pid=""
  wait "$tail_pid" 2>/dev/null
  tail_pid=""
  [ $status != 77 ] || exit 77
  # Where this process got to: the index its last recorded case had, or the one before its first.
  done_index=$((first - 1))
  if [ -s "$record" ] && [ "$(last_index)" -ge "$first" ]; then done_index=$(last_index); fi
  if [ $hung = 1 ]; then
    index=$((done_index + 1))
    printf '%s\thung\t%s\t%s\n' "$index" "$stall" "$(name_of "$index" "$@")" >>"$record"
    echo
    echo "gpu tests: case $index ended in none of $stall s; its process was killed"
    faults+=("case $index hung")
  elif [ $status = 3 ] && [ "$(last_outcome)" = context-lost ]; then
    index=$done_index
    faults+=("the CUDA context was lost in case $index")
  elif [ $status -gt 128 ]; then
    # doctest records the crashed case before the signal ends the process; where it could not,
    # the case after the last recorded one is the one that crashed.
    index=$done_index
    if [ "$(last_outcome)" != crashed ] || [ "$done_index" -lt "$first" ]; then
      index=$((done_index + 1))
      printf '%s\tcrashed\t-\t%s\n' "$index" "$(name_of "$index" "$@")" >>"$record"
    fi
    echo
    echo "gpu tests: case $index crashed the process (exit status $status)"
    faults+=("case $index crashed the process")
  else
    break
  fi
  first=$((index + 1))
  total=$(count_of "$@")
  [ "$first" -le "${total:-0}" ] || break
  if [ $((processes - 1)) -ge "$restarts" ]; then
    echo "gpu tests: $restarts restarts spent; the cases from $first on did not run"
    break
  fi
done

# Where the time went, for the next run's budget: the longest cases.
if [ -s "$record" ]; then
  echo
  echo "== the longest gpu test cases (seconds):"
  awk -F'\t' '$3 ~ /^[0-9.]+$/ { printf "%8.1f  %s\n", $3, $4 }' "$record" | sort -rn | head -n 8
fi

[ ${#faults[@]} -gt 0 ] || exit $((status == 0 ? 0 : 1))

# Over every process: each case's last outcome.
total=$(count_of "$@")
echo
plural=es
[ "$processes" != 1 ] || plural=""
printf '== gpu tests over %s process%s:' "$processes" "$plural"
printf ' %s;' "${faults[@]}"
echo
awk -F'\t' -v total="${total:-0}" '
  { outcome[$1] = $2; name[$1] = $4 }
  END {
    for (i = 1; i <= total; ++i) {
      if (!(i in outcome)) { ++missing; continue }
      if (outcome[i] == "passed") { ++passed; continue }
      ++failed
      printf "FAILED: case %d (%s): %s\n", i, outcome[i], name[i]
    }
    printf "[doctest] test cases: %d | %d passed | %d failed | %d not run\n", total, passed, failed, missing
    exit (total > 0 && passed == total) ? 0 : 1
  }' "$record"
