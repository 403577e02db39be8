#!/usr/bin/env bash
# CIFAR-10 as torchvision downloads it (torchvision's root with cifar-10-batches-py/, and
# cifar-10-python.tar.gz read in place) trains on the CPU exactly as the binary version of the
# same images: the same seed gives byte-identical weights, which a single changed label
# breaks. Python 3 pickles of the same data, a damaged archive and a file in no known format
# are refused with the fix. The files come from tests/support/cifar_python_files.py, whose
# --check loads them as torchvision does; it needs a Python with numpy.
. "$(dirname "$0")/lib.sh"
: "${RDDP_SOURCE_DIR:?set RDDP_SOURCE_DIR to the source tree}"
python=$("$RDDP_SOURCE_DIR/scripts/find_python.sh" numpy) ||
  { echo "SKIPPED: no Python imports numpy (scripts/setup.sh installs python3-numpy)"; exit 77; }
gen=$work/gen
expect 0 "the files load with pickle.load" -- \
  "$python" "$RDDP_SOURCE_DIR/tests/support/cifar_python_files.py" "$gen" --check

# Two steps of 16 take all 32 samples the limit keeps, shuffled by the seed; the imagenet stem
# keeps CPU steps short.
train=(--device cpu --stem imagenet --batch-size 16 --limit-train 32 --limit-val 8 --max-steps 2
       --seed 7)
expect 0 "data +CIFAR-10 train \(.*cifar-10-batches-bin, 40 images\)" -- \
  "$RDDP_BIN" --data "$gen/cifar10-binary" "${train[@]}" --save-weights "$work/binary.rddp"
expect 0 "data +CIFAR-10 train \(.*cifar10-root/cifar-10-batches-py, 40 images\)" -- \
  "$RDDP_BIN" --data "$gen/cifar10-root" "${train[@]}" --save-weights "$work/folder.rddp"
check "torchvision's root gives the binary version's weights" \
  cmp "$work/binary.rddp" "$work/folder.rddp"
archive=$gen/cifar10-archive/cifar-10-python.tar.gz
expect 0 "data +CIFAR-10 train \(.*cifar-10-python.tar.gz, 40 images\)" -- \
  "$RDDP_BIN" --data "$archive" --dataset cifar10 "${train[@]}" --save-weights "$work/archive.rddp"
check "the archive gives the binary version's weights" cmp "$work/binary.rddp" "$work/archive.rddp"

# The comparison sees one sample's label: data_batch_2.bin's record 3 (sample 11) changed.
cp -r "$gen/cifar10-binary" "$work/changed"
record=$work/changed/cifar-10-batches-bin/data_batch_2.bin
label=$(od -An -tu1 -j $((3 * 3073)) -N1 "$record" | tr -d ' ')
printf "\\$(printf '%03o' $(((label + 1) % 10)))" |
  dd of="$record" bs=1 seek=$((3 * 3073)) conv=notrunc status=none
expect 0 "weights written" -- \
  "$RDDP_BIN" --data "$work/changed" "${train[@]}" --save-weights "$work/changed.rddp"
check "a changed label gives other weights" \
  bash -c "! cmp -s '$work/binary.rddp' '$work/changed.rddp'"

# Refused, naming the file and the fix.
fix="Use the download itself \(cifar-10-python.tar.gz"
expect 1 "batches.meta: written by Python 3's pickle \(BINUNICODE at byte [0-9]+\).*$fix" -- \
  "$RDDP_BIN" --data "$gen/python3/protocol-2" --device cpu
expect 1 "batches.meta: written by Python 3's pickle \(PROTO [3-9] at byte 0\).*$fix" -- \
  "$RDDP_BIN" --data "$gen/python3/protocol-default" --device cpu
expect 1 "cifar-10-python.tar.gz: unexpected end of file .*download it again" -- \
  "$RDDP_BIN" --data "$gen/bad/truncated-archive" --device cpu
expect 1 "data_batch_1.bin is a file.*cifar-10-python.tar.gz and cifar-100-python.tar.gz" -- \
  "$RDDP_BIN" --data "$gen/cifar10-binary/cifar-10-batches-bin/data_batch_1.bin" --device cpu
finish
