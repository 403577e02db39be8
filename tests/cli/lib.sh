# Helpers for the command-line tests. Each check prints what it checked; the first failure
# prints the command's output and exits 1.
set -u
: "${RDDP_BIN:?set RDDP_BIN to the resnet_ddp program}"
work=$(mktemp -d)
# A test that fails while a run it started in the background is still going must not leave it
# training on (with --epochs 1000, for hours): what is left is killed before the folder goes.
trap 'kill -KILL $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
checks=0

failed() {
  echo "FAILED: $1" >&2
  [ -f "$work/out" ] && sed 's/^/  | /' "$work/out" >&2
  exit 1
}

# expect CODE PATTERN -- COMMAND...: the command exits with CODE and its output matches PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  "$@" >"$work/out" 2>&1
  local got=$?
  [ "$got" = "$code" ] || failed "exit code $got, expected $code: $*"
  grep -qE -- "$pattern" "$work/out" || failed "no line matching /$pattern/: $*"
  checks=$((checks + 1))
  echo "ok $checks: exit $code, /$pattern/: ${*#$RDDP_BIN}"
}

check() {
  local what=$1
  shift
  "$@" || failed "$what"
  checks=$((checks + 1))
  echo "ok $checks: $what"
}

finish() { echo "$checks passed, 0 failed"; }

# names_real_flags FILE: every --flag that FILE names is one of resnet_ddp --help's, so that a
# message never sends the user to a flag that does not exist.
names_real_flags() {
  local help flag
  help=$("$RDDP_BIN" --help)
  for flag in $(grep -oE -- '--[a-z0-9][a-z0-9-]*' "$1" | sort -u); do
    grep -qE -- "^  $flag( |$)" <<<"$help" ||
      { echo "$1 names $flag, which resnet_ddp --help does not list" >&2; return 1; }
  done
}
