#!/usr/bin/env bash
# Fuzzes every parser of user files (tests/fuzz/fuzz_targets.h) with libFuzzer, under
# AddressSanitizer and UndefinedBehaviorSanitizer: builds the harnesses with clang in their
# own build directory, runs each for a fixed time, prints what each did and a summary, and
# exits non-zero when any found something. A finding's input is kept under
# <build>/findings/<harness>/; once fixed, copy it to tests/fuzz/regressions/<harness>/, where
# the unit test cpu.test_fuzz_regressions replays it in every build.
#   scripts/fuzz.sh                  every harness, 60 s each
#   scripts/fuzz.sh -t 5 idx image   these two, 5 s each
# Environment: RDDP_FUZZ_SECONDS (per harness, default 60; -t wins), RDDP_FUZZ_BUILD_DIR
# (default build-fuzz), RDDP_FUZZ_TIMEOUT (seconds one input may take before it counts as a
# hang, default 10), RDDP_FUZZ_RSS_MB (memory before an input counts as a huge allocation,
# default 2048), RDDP_FUZZ_CXX (default clang++), RDDP_CUDA_ARCHS (default 90; the library is
# built whole, CUDA included).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RDDP_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${RDDP_FUZZ_SECONDS:-60}
timeout=${RDDP_FUZZ_TIMEOUT:-10}
rss_mb=${RDDP_FUZZ_RSS_MB:-2048}
all_harnesses=(cifar cifar_pickle idx image tiny_imagenet tensor_file pack options)

usage() { sed -n '2,16s/^# \{0,1\}//p' "$0"; }
while getopts "t:h" option; do
  case $option in
    t) seconds=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all_harnesses[@]}")
for name in "${harnesses[@]}"; do
  [[ " ${all_harnesses[*]} " == *" $name "* ]] ||
    { echo "fuzz.sh: no harness '$name'; there are: ${all_harnesses[*]}" >&2; exit 2; }
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: -t needs whole seconds >= 1, got '$seconds'" >&2; exit 2; }

"$root/scripts/setup.sh" --fuzz
mkdir -p "$build"
echo "fuzz.sh: building the harnesses in $build"
cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="${RDDP_FUZZ_CXX:-clang++}" -DRDDP_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${RDDP_CUDA_ARCHS:-90}" \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" \
  --target "${harnesses[@]/#/fuzz_}" >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }

# The targets rewrite their files at every execution: keep them in memory where possible.
scratch_parent=/dev/shm
[ -w "$scratch_parent" ] || scratch_parent=${TMPDIR:-/tmp}
export RDDP_FUZZ_SCRATCH
RDDP_FUZZ_SCRATCH=$(mktemp -d "$scratch_parent/rddp-fuzz.XXXXXX")
trap 'rm -rf "$RDDP_FUZZ_SCRATCH"' EXIT
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# The value after `key:` in the last line of a log that has it.
last_field() { grep -o "$2: *[0-9/a-zA-Z]*" "$1" | tail -1 | sed "s/^$2: *//" || true; }
# Inputs libFuzzer kept for a crash (sanitizer report or uncaught exception), a leak, a hang
# (over RDDP_FUZZ_TIMEOUT) or memory over RDDP_FUZZ_RSS_MB.
count_findings() {
  find "$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
    wc -l
}

summary=()
failed=()
for name in "${harnesses[@]}"; do
  corpus="$build/corpus/$name"      # what this and earlier runs found worth keeping
  findings="$build/findings/$name"
  log="$build/logs/$name.log"
  mkdir -p "$corpus" "$findings" "$build/logs"
  seeds=("$root/tests/fuzz/corpus/$name")
  [ -d "$root/tests/fuzz/regressions/$name" ] && seeds+=("$root/tests/fuzz/regressions/$name")
  echo "fuzz.sh: $name for ${seconds} s"
  before=$(count_findings "$findings")
  status=0
  "$build/fuzz_$name" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss_mb" \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "${seeds[@]}" >"$log" 2>&1 ||
    status=$?

  executions=$(last_field "$log" "stat::number_of_executed_units")
  per_second=$(last_field "$log" "stat::average_exec_per_sec")
  new_units=$(last_field "$log" "stat::new_units_added")
  peak_mb=$(last_field "$log" "stat::peak_rss_mb")
  coverage=$(last_field "$log" "cov")
  features=$(last_field "$log" "ft")
  corpus_size=$(find "$corpus" -type f | wc -l)
  found=$(($(count_findings "$findings") - before))
  echo "  executions ${executions:-?}, ${per_second:-?}/s, coverage ${coverage:-?} edges," \
       "${features:-?} features, corpus $corpus_size (+${new_units:-?}), peak ${peak_mb:-?} MB"
  if [ "$status" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed+=("$name")
    echo "  FINDING (exit status $status): the sanitizer's report, from $log:"
    grep -E "^(==[0-9]+== ?ERROR|SUMMARY|.*runtime error|.*what\(\))" "$log" |
      head -5 | sed 's/^/    /' || true
    grep -E "Test unit written to" "$log" | sed 's/^/    /' || true
    echo "    reproduce: $build/fuzz_$name <the input above>"
    found=$((found > 0 ? found : 1))
  fi
  summary+=("$(printf '%-14s %12s %9s %8s %9s %8s %9s %9s' "$name" "${executions:-?}" \
    "${per_second:-?}" "${coverage:-?}" "${features:-?}" "$corpus_size" "${peak_mb:-?}" "$found")")
done

echo
printf '%-14s %12s %9s %8s %9s %8s %9s %9s\n' harness executions "exec/s" coverage features \
  corpus "peak MB" findings
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs under $build/findings/)" >&2
  exit 1
fi
echo "fuzz.sh: no findings (${seconds} s per harness)"
