#!/usr/bin/env bash
# Prints the first Python interpreter that imports every module named on the command line
# (e.g. `scripts/find_python.sh torch torchvision`), or exits 1 saying what is missing.
# $RDDP_PYTHON wins when set; then Debian's /usr/bin/python3, whose python3-torch is our
# oracle; then whatever python3 is first on PATH.
set -u
imports=""
for module in "$@"; do imports+="import $module;"; done
for candidate in ${RDDP_PYTHON:-} /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  if "$candidate" -c "$imports" >/dev/null 2>&1; then
    echo "$candidate"
    exit 0
  fi
done
echo "find_python.sh: no Python imports: $*; install Debian's python3-$1 (scripts/setup.sh does it as root) or set RDDP_PYTHON" >&2
exit 1
