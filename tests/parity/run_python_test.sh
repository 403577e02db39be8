#!/usr/bin/env bash
# Runs one parity script under a Python with torch and torchvision.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if ! python=$("$here/../../scripts/find_python.sh" torch torchvision numpy); then
  if [ "${RDDP_REQUIRE_PARITY:-0}" = 1 ]; then
    echo "FAILED: $(basename "$1"): PyTorch is required (RDDP_REQUIRE_PARITY=1) but not found" >&2
    exit 1
  fi
  echo "SKIPPED: $(basename "$1"): no Python with torch and torchvision (run scripts/setup.sh)"
  exit 77
fi
export PYTHONPATH="$here/../../scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$python" "$1"
