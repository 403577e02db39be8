#!/usr/bin/env bash
# Every output path is checked before any work, naming the path and the fix: --save-weights in a
# missing or unwritable directory, onto a directory, a device or a FIFO, or onto the --log-json
# file; --checkpoint-dir that is a file or cannot be written; --log-json that cannot be opened. A device or FIFO is left as it
# was. A metrics log whose writes fail mid-run (a full disk) costs its records, with a warning,
# not the training.
. "$(dirname "$0")/lib.sh"
train=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 --limit-val 8 --print-every 1
       --image-size 16 --epochs 1)

# refused PATTERN FLAGS...: exit 1 before the first training step, saying PATTERN.
refused() {
  local pattern=$1
  shift
  expect 1 "$pattern" -- "${train[@]}" "$@"
  grep -q "step 1/" "$work/out" && failed "training started before $* was refused"
}

refused "error: --save-weights: cannot write '$work/missing/w.rddp': .*the directory '$work/missing' does not exist: create it or fix the path" \
  --save-weights "$work/missing/w.rddp"
mkdir "$work/weights-dir"
refused "error: --save-weights: cannot write '$work/weights-dir': it is a directory; give the path of a file" \
  --save-weights "$work/weights-dir"
check "the directory is left empty" test -z "$(ls -A "$work/weights-dir")"
touch "$work/a-file"
refused "error: --checkpoint-dir '$work/a-file' is a file, not a directory: give a directory" \
  --checkpoint-dir "$work/a-file"
refused "error: --checkpoint-dir '$work/a-file/ck': cannot create it" --checkpoint-dir "$work/a-file/ck"
refused "error: --log-json: cannot open '$work/missing/log.jsonl' for appending: No such file or directory; create its directory" \
  --log-json "$work/missing/log.jsonl"

refused "error: --save-weights and --log-json name the same file '$work/./run.out': the weights written at the end would replace the metrics log" \
  --save-weights "$work/./run.out" --log-json "$work/run.out"

# Special files: a FIFO for anyone; copies of /dev/null and /dev/full where mknod is allowed (root).
mkfifo "$work/fifo"
refused "error: --save-weights: cannot write '$work/fifo': it is a FIFO, not a regular file. Only a regular file is replaced" \
  --save-weights "$work/fifo"
check "the FIFO is still a FIFO" test -p "$work/fifo"
refused "error: --log-json: cannot open '$work/fifo' for appending: .*it is a FIFO that no process reads" \
  --log-json "$work/fifo"
cat "$work/fifo" >"$work/fifo.lines" &
reader=$!
expect 0 "epoch 1/1" -- "${train[@]}" --log-json "$work/fifo"
wait "$reader"
check "a FIFO with a reader gets the metrics records" grep -q '"type":"epoch"' "$work/fifo.lines"
for device in "null 1 3" "full 1 7"; do
  set -- $device
  if mknod "$work/dev-$1" c "$2" "$3" 2>/dev/null; then
    refused "error: --save-weights: cannot write '$work/dev-$1': it is a character device, not a regular file" \
      --save-weights "$work/dev-$1"
    check "the copy of /dev/$1 is still a character device" test -c "$work/dev-$1"
  else
    echo "skipped: a copy of /dev/$1 (mknod needs root; the FIFO above stands for it)"
  fi
done

# Directories this user cannot write: as root, the program runs as nobody.
as_user=()
if [ "$(id -u)" = 0 ]; then
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  chmod 755 "$work"
fi
mkdir -m 555 "$work/read-only"
if "${as_user[@]}" test -w "$work/read-only"; then
  echo "skipped: unwritable directories (this user writes to a mode 555 directory)"
else
  expect 1 "error: --save-weights: cannot write '$work/read-only/w.rddp': .*'$work/read-only' is not writable: choose a directory you can write to" -- \
    "${as_user[@]}" "${train[@]}" --save-weights "$work/read-only/w.rddp"
  expect 1 "error: --checkpoint-dir '$work/read-only': checkpoints cannot be written there: .*is not writable" -- \
    "${as_user[@]}" "${train[@]}" --checkpoint-dir "$work/read-only"
  grep -q "step 1/" "$work/out" && failed "training started in an unwritable --checkpoint-dir"
fi

# Every write of the metrics log fails (/dev/full: no space left): one warning, the training
# goes on to the end, and the last line counts what was lost.
expect 0 "warning: --log-json: cannot write '/dev/full': No space left on device; training goes on" -- \
  "${train[@]}" --log-json /dev/full --save-weights "$work/w.rddp"
check "the run still trained and wrote its weights" test -s "$work/w.rddp"
check "one warning for the failed writes" test "$(grep -c "cannot write '/dev/full'" "$work/out")" = 1
check "the end counts the lost records" grep -qE "warning: --log-json: [0-9]+ record\(s\) could not be written to '/dev/full' \(the first: \{\"type\":\"start\"" "$work/out"
finish
