#!/usr/bin/env bash
# scripts/plot_precision_curves.py reads what resnet_ddp --log-json writes: two short CPU runs
# (fp32 and tf32; the CPU refuses bf16 and fp16) are drawn and pass; doctored copies of a real
# log (an accuracy 5 points down, a loss that turned NaN, two runs appended into one file) fail
# with the reason, and bad arguments are refused. Needs a Python with matplotlib, else SKIPPED.
. "$(dirname "$0")/lib.sh"
: "${RDDP_SOURCE_DIR:?set RDDP_SOURCE_DIR to the source tree}"
if ! python=$("$RDDP_SOURCE_DIR/scripts/find_python.sh" matplotlib 2>/dev/null); then
  echo "SKIPPED: no Python with matplotlib (Debian: python3-matplotlib)"
  exit 77
fi
plot=("$python" "$RDDP_SOURCE_DIR/scripts/plot_precision_curves.py")
run=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 --limit-val 16
     --epochs 2 --lr-schedule cosine --print-every 2 --image-size 16)

for precision in fp32 tf32; do
  expect 0 "epoch 2/2" -- "${run[@]}" --precision "$precision" --log-json "$work/$precision.jsonl"
done
expect 0 "verdict: PASS" -- "${plot[@]}" fp32="$work/fp32.jsonl" tf32="$work/tf32.jsonl" -o "$work/curves.png" \
  --title "CPU test"
grep -qE '^\| tf32 \| 2 \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+ \| [-+][0-9.]+ % \| [0-9.]+ \|  \| pass \|$' "$work/out" ||
  failed "no table row for tf32 with both gaps"
check "the PNG is a PNG" test "$(head -c 8 "$work/curves.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n'

# Doctored copies of the real fp32 log: only the last epoch record changes.
"$python" - "$work" <<'EOF' || failed "could not write the doctored logs"
import json, os, sys
work = sys.argv[1]
lines = open(os.path.join(work, "fp32.jsonl")).read().splitlines()
last = max(i for i, line in enumerate(lines) if '"type":"epoch"' in line)
def write(name, change):
    record = json.loads(lines[last])
    text = change(record)
    with open(os.path.join(work, name), "w") as out:
        out.write("\n".join(lines[:last] + [text] + lines[last + 1:]) + "\n")
def worse(record):
    record["val_accuracy"] -= 0.05
    return json.dumps(record, separators=(",", ":"))
# As resnet_ddp's %.9g prints a NaN: a bare -nan, not JSON.
def diverged(record):
    record["val_loss"] = 12345.0
    return json.dumps(record, separators=(",", ":")).replace("12345.0", "-nan")
write("worse.jsonl", worse)
write("diverged.jsonl", diverged)
EOF
expect 1 "FAIL: worse: final accuracy -5.00 points from fp32 \(bound 1\)" -- \
  "${plot[@]}" fp32="$work/fp32.jsonl" worse="$work/worse.jsonl" --no-plot
expect 1 "FAIL: diverged: non-finite loss or accuracy" -- \
  "${plot[@]}" fp32="$work/fp32.jsonl" diverged="$work/diverged.jsonl" --no-plot
expect 0 "verdict: PASS" -- "${plot[@]}" fp32="$work/fp32.jsonl" worse="$work/worse.jsonl" --no-plot \
  --max-accuracy-gap 6
cat "$work/fp32.jsonl" "$work/tf32.jsonl" >"$work/twice.jsonl"
expect 2 "twice.jsonl:.*more than one run" -- "${plot[@]}" fp32="$work/twice.jsonl" tf32="$work/tf32.jsonl" --no-plot
expect 2 "give each run as LABEL=FILE" -- "${plot[@]}" "$work/fp32.jsonl" --no-plot
expect 2 "--reference bf16: no run has that label" -- \
  "${plot[@]}" fp32="$work/fp32.jsonl" tf32="$work/tf32.jsonl" --reference bf16 --no-plot
expect 2 "missing.jsonl: cannot read it" -- "${plot[@]}" fp32="$work/missing.jsonl" --no-plot
finish
