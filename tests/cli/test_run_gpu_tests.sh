#!/usr/bin/env bash
# scripts/run_gpu_tests.sh: a case that loses the CUDA context, crashes or hangs ends its process,
# and the cases after it run in a new one. The GPU test program built against the CUDA emulator
# plants each fault itself (RDDP_GPU_TESTS_FAULT, tests/gpu/case_record.cpp), through the same
# doctest paths a real fault takes; its quick fake-cuDNN cases stand in for the suite.
source "$(dirname "$0")/lib.sh"
script=$RDDP_SOURCE_DIR/scripts/run_gpu_tests.sh
if [ ! -x "${RDDP_EMULATED_ENGINE_TESTS:-}" ]; then
  echo "SKIPPED: the emulated GPU test program is not built here (tests/emu)"
  exit 77
fi
program=$RDDP_EMULATED_ENGINE_TESTS
cases=(--source-file='*/test_fake_cudnn.cpp')
count=$("$program" "${cases[@]}" --count | grep -o 'filters: [0-9]*' | grep -o '[0-9]*$')
# Faults are planted at cases 2, 3 and 5 and at the last one, so at least six are needed.
check "at least six cases stand in for the suite (found $count)" [ "${count:-0}" -ge 6 ]
n=$count

expect 2 "name the GPU test program" -- "$script"
expect 2 "--stall needs whole seconds, got 'soon'" -- "$script" --stall soon "$program"
expect 2 "is not an executable; build it first" -- "$script" "$work/none"

# Without a GPU the program's own SKIPPED line and status 77 come through.
printf '#!/bin/sh\necho "SKIPPED: gpu tests: no CUDA device answers"\nexit 77\n' >"$work/no-gpu"
printf '#!/bin/sh\necho "[doctest] test cases: 1 | 0 passed | 1 failed"\nexit 1\n' >"$work/failing"
chmod +x "$work/no-gpu" "$work/failing"
expect 77 "^SKIPPED: gpu tests: no CUDA device answers" -- "$script" "$work/no-gpu"
# A case that fails in a working context is the program's own verdict: one process, status 1.
expect 1 "1 failed" -- "$script" "$work/failing"
check "a plain failure starts no second process" bash -c "! grep -q 'new process' '$work/out'"

expect 0 "test cases: +$n \| +$n passed \| 0 failed" -- "$script" "$program" "${cases[@]}"
check "a clean run is one process" bash -c "! grep -q 'new process' '$work/out'"
check "it ends with the longest cases, in seconds" \
  bash -c "grep -A1 '^== the longest gpu test cases (seconds):' '$work/out' | grep -qE '^ +[0-9]+\.[0-9]  fake cuDNN: '"

with_fault() { RDDP_GPU_TESTS_FAULT=$1 "${@:2}"; }
summary() { echo "^\[doctest\] test cases: $n \| $1 passed \| $2 failed \| $3 not run$"; }

expect 1 "the CUDA context was lost in case 3 \".+\" \(planted by RDDP_GPU_TESTS_FAULT\)" -- \
  with_fault lose-context:3 "$script" "$program" "${cases[@]}"
check "after the lost context the cases from 4 on ran in a new process" \
  grep -q "== gpu tests from case 4 on, in a new process" "$work/out"
check "the lost case is named as failed" grep -qE "^FAILED: case 3 \(context-lost\): fake cuDNN" "$work/out"
check "the summary over both processes is the last doctest line" \
  bash -c "grep '^\[doctest\] test cases:' '$work/out' | tail -1 | grep -qE '$(summary $((n - 1)) 1 0)'"

expect 1 "case 5 crashed the process \(exit status 139\)" -- \
  with_fault crash:5 "$script" "$program" "${cases[@]}"
check "doctest reported the crash" grep -q "test case CRASHED: SIGSEGV" "$work/out"
check "the crash's summary: all but case 5 passed" grep -qE "$(summary $((n - 1)) 1 0)" "$work/out"

expect 1 "case 2 ended in none of 2 s; its process was killed" -- \
  with_fault hang:2 "$script" --stall 2 "$program" "${cases[@]}"
check "the hung case is named from the program's list" \
  grep -qE "^FAILED: case 2 \(hung\): fake cuDNN: .+" "$work/out"
check "the hang's summary: all but case 2 passed" grep -qE "$(summary $((n - 1)) 1 0)" "$work/out"

# The last case hanging leaves nothing to restart, and still gets its summary.
expect 1 "case $n ended in none of 2 s" -- with_fault hang:$n "$script" --stall 2 "$program" "${cases[@]}"
check "a hung last case: one process, the others passed" \
  bash -c "! grep -q 'new process' '$work/out' && grep -qE '$(summary $((n - 1)) 1 0)' '$work/out'"

expect 1 "0 restarts spent; the cases from 4 on did not run" -- \
  with_fault lose-context:3 "$script" --restarts 0 "$program" "${cases[@]}"
check "with no restarts left the rest count as not run" grep -qE "$(summary 2 1 $((n - 3)))" "$work/out"

# A time limit around the script (timeout, ctest) takes the test process with it. The pattern is
# anchored at the program's path, so that it finds neither the script nor the checks' own shells.
marker=run-gpu-tests-term-$$
test_process="^$program .*$marker"
RDDP_GPU_TESTS_FAULT=hang:1 "$script" --stall 100 "$program" "${cases[@]}" \
  --test-case-exclude="$marker" >"$work/term.log" 2>&1 &
runner=$!
for _ in $(seq 50); do pgrep -f -- "$test_process" >/dev/null && break; sleep 0.2; done
check "the hanging test process started" bash -c "pgrep -f -- '$test_process' >/dev/null"
kill -TERM "$runner"
wait "$runner"
status=$?
check "TERM ends the script with status 124 (got $status)" [ "$status" = 124 ]
sleep 2
check "and no test process is left behind" bash -c "! pgrep -f -- '$test_process'"
finish
