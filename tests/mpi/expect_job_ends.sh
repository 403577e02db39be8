#!/usr/bin/env bash
# Runs a job that must fail and checks that it ends within a bound, with a non-zero status,
# and that its output holds every expected pattern (extended regular expressions). The bound
# is enforced with `timeout`, so a hang fails the test instead of stalling the suite.
#   expect_job_ends.sh SECONDS PATTERN... -- COMMAND...
set -u
bound=$1
shift
patterns=()
while [[ $# -gt 0 && $1 != "--" ]]; do
  patterns+=("$1")
  shift
done
shift

start=$(date +%s%N)
output=$(timeout -k 5 "$bound" "$@" 2>&1)
status=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
printf '%s\n' "$output"
echo "--- the job ended with status $status after $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s (bound $bound s)"

failed=0
if ((elapsed_ms >= bound * 1000)); then
  echo "FAILED: the job did not end within $bound s"
  failed=1
elif ((status == 0)); then
  echo "FAILED: the job ended with status 0, but one of its ranks failed"
  failed=1
fi
for pattern in "${patterns[@]}"; do
  if ! grep -Eq -- "$pattern" <<<"$output"; then
    echo "FAILED: the output lacks /$pattern/"
    failed=1
  fi
done
((failed == 0)) && echo "ok: the job ended non-zero within the bound, with the expected messages"
exit $failed
