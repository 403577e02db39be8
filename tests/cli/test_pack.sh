#!/usr/bin/env bash
# resnet_ddp_pack packs a small image folder; resnet_ddp trains on the pack as on the folder;
# bad inputs and damaged packs are refused, naming the file.
. "$(dirname "$0")/lib.sh"
: "${RDDP_PACK_BIN:?set RDDP_PACK_BIN to the resnet_ddp_pack program}"
pack="$RDDP_PACK_BIN"

# A binary PPM of random pixels: any size, no image library needed.
ppm() {
  local path=$1 width=$2 height=$3
  mkdir -p "$(dirname "$path")"
  { printf 'P6\n%d %d\n255\n' "$width" "$height"; head -c $((width * height * 3)) /dev/urandom; } >"$path"
}
folder="$work/folder"
for class in ant bee; do
  for size in "40 30" "31 52" "48 48" "70 33"; do
    set -- $size
    ppm "$folder/train/$class/${1}x$2.ppm" "$1" "$2"
  done
  ppm "$folder/val/$class/v.ppm" 45 36
done

expect 0 "train.rddp-pack: 8 images" -- "$pack" "$folder" "$work/packed" --size 40 --threads 2
grep -q "resnet_ddp_pack: train: 8/8 images" "$work/out" || failed "no progress line on stderr"
check "val.rddp-pack written" test -f "$work/packed/val.rddp-pack"
check "no temporary left behind" test "$(ls "$work/packed" | wc -l)" = 2

# 16x16 crops, one run: under the sanitizers (test_sanitizers.sh) a step at 32x32 took 40 s.
train=("$RDDP_BIN" --device cpu --batch-size 4 --image-size 16 --max-steps 1 --limit-val 2)
expect 0 "packed train \(.*train.rddp-pack, 8 images, 2 classes, shorter side 40\)" -- \
  "${train[@]}" --data "$work/packed"
check "the run on the pack trains a step" grep -q "step 1" "$work/out"

# Bad command lines and inputs.
expect 2 "give the input folder and the output folder" -- "$pack" "$folder"
expect 2 "--size: 0 is outside the accepted range" -- "$pack" "$folder" "$work/x" --size 0
expect 2 "unknown option '--resize'" -- "$pack" "$folder" "$work/x" --resize 3
expect 1 "$work/missing" -- "$pack" "$work/missing" "$work/x"
echo "not an image" >"$folder/train/bee/broken.ppm"
expect 1 "broken.ppm" -- "$pack" "$folder" "$work/x"
rm "$folder/train/bee/broken.ppm"

# Damaged packs: cut short, a changed byte in the index (checked at open; an image's own CRC
# is checked when it is read, which the unit tests cover), another version.
cp -r "$work/packed" "$work/cut"
head -c 5000 "$work/packed/train.rddp-pack" >"$work/cut/train.rddp-pack"
expect 1 "cut/train.rddp-pack' is truncated.*resnet_ddp_pack" -- "${train[@]}" --data "$work/cut"
cp -r "$work/packed" "$work/flipped"
index_byte=$(($(stat -c %s "$work/packed/train.rddp-pack") - 28 - 4 - 10))
printf '\x55' | dd of="$work/flipped/train.rddp-pack" bs=1 seek=$index_byte conv=notrunc status=none
expect 1 "flipped/train.rddp-pack' is damaged: the index's CRC does not match" -- \
  "${train[@]}" --data "$work/flipped"
cp -r "$work/packed" "$work/v9"
printf '\x09' | dd of="$work/v9/train.rddp-pack" bs=1 seek=8 conv=notrunc status=none
expect 1 "v9/train.rddp-pack' is a pack of format version 9" -- "${train[@]}" --data "$work/v9"
finish
