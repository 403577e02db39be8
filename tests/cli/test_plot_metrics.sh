#!/usr/bin/env bash
# scripts/plot_metrics.py, as the README runs it (through its own #! line), draws a --log-json
# file: under a python3 without matplotlib it runs itself again under one that has it; where
# none has it, it says how to get it. Needs a Python with matplotlib somewhere, else SKIPPED.
. "$(dirname "$0")/lib.sh"
: "${RDDP_SOURCE_DIR:?set RDDP_SOURCE_DIR to the source tree}"
plot=$RDDP_SOURCE_DIR/scripts/plot_metrics.py
if ! "$RDDP_SOURCE_DIR/scripts/find_python.sh" matplotlib >/dev/null 2>&1; then
  echo "SKIPPED: no Python with matplotlib (Debian: python3-matplotlib)"
  exit 77
fi
expect 0 "epoch 2/2" -- "$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 \
  --limit-val 16 --epochs 2 --print-every 2 --image-size 16 --log-json "$work/run.jsonl"
expect 0 "wrote $work/run.png" -- "$plot" "$work/run.jsonl" -o "$work/run.png"
check "the PNG is a PNG" test "$(head -c 4 "$work/run.png" | od -An -c | tr -d ' ')" = '211PNG'

# A Python without matplotlib, as a virtual environment's python3 first on PATH may be: the
# script finds Debian's (or another) and draws all the same.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexec /usr/bin/env -u PYTHONPATH %s -S "$@"\n' "$(command -v python3)" >"$work/bin/python3"
chmod +x "$work/bin/python3"
if ! PATH="$work/bin:$PATH" python3 -c "import matplotlib" 2>/dev/null; then
  expect 0 "wrote $work/again.png" -- env PATH="$work/bin:$PATH" python3 "$plot" "$work/run.jsonl" \
    -o "$work/again.png"
fi
# Where no Python has it (the second run is the one that looked), the message says what to do.
expect 1 "matplotlib is missing: install python3-matplotlib" -- env RDDP_PLOT_RERUN=1 \
  PATH="$work/bin:$PATH" python3 "$plot" "$work/run.jsonl" -o "$work/none.png"
finish
