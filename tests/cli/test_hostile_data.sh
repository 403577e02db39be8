#!/usr/bin/env bash
# Data and packs a careful user or a hostile file system could hand over: symbolic link loops,
# FIFOs and devices named like data, a .gz that inflates far past its header, a file whose open
# never returns (a hung mount) when SIGTERM comes, a pack folder holding an earlier run's split
# or a killed run's temporaries, control characters in file names, unreadable files. Each ends
# with a clear message naming the file, never a hang, and nothing that passes for current data.
. "$(dirname "$0")/lib.sh"
: "${RDDP_PACK_BIN:?set RDDP_PACK_BIN to the resnet_ddp_pack program}"
: "${RDDP_HANG_OPEN_LIB:?set RDDP_HANG_OPEN_LIB to the library that makes an open hang}"
pack="$RDDP_PACK_BIN"
# Every run ends within these bounds or fails the test: a hang is what is being tested.
bounded=(timeout -k 5 60)
# 16x16 crops, one batch of the whole folder.
train=("$RDDP_BIN" --device cpu --image-size 16 --batch-size 8 --limit-val 2)

ppm() {
  local path=$1 width=$2 height=$3
  mkdir -p "$(dirname "$path")"
  { printf 'P6\n%d %d\n255\n' "$width" "$height"; head -c $((width * height * 3)) /dev/urandom; } >"$path"
}
# An image folder of 2 classes x 4 training images, one validation image each.
make_folder() {
  local root=$1 class i
  for class in ant bee; do
    for i in 1 2 3 4; do ppm "$root/train/$class/$i.ppm" $((16 + i)) 18; done
    ppm "$root/val/$class/v.ppm" 20 20
  done
}

# Symbolic links back to the split: the walk ends, each folder once, and the run says so.
make_folder "$work/loops"
ln -s .. "$work/loops/train/ant/up1"
ln -s .. "$work/loops/train/ant/up2"
skipped="2 symbolic link\(s\) to folders already listed not followed \(first: $work/loops/train/ant/up1 -> \.\.\)"
expect 0 "train: image folder train \(.*8 images, 2 classes; $skipped" -- \
  "${bounded[@]}" "$pack" "$work/loops" "$work/loops-packed" --size 16 --threads 1
check "the pack of the folder with loops holds its 8 images" \
  grep -q "train.rddp-pack: 8 images" "$work/out"
expect 0 "data +image folder train \(.*8 images, 2 classes; $skipped" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/loops" --max-steps 1

# A FIFO named like an image (a pipe with no writer blocks an open) and links to a FIFO and to
# /dev/zero (whose reads never end): refused when listed, or when read, naming each.
make_folder "$work/special"
mkfifo "$work/special/train/ant/pipe.ppm"
expect 1 "named like images that are FIFOs, sockets or devices, not files \($work/special/train/ant/pipe" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/special"
rm "$work/special/train/ant/pipe.ppm"
mkfifo "$work/pipe"
ln -s "$work/pipe" "$work/special/train/ant/0-pipe.ppm"
expect 1 "0-pipe.ppm: it is a FIFO \(named pipe\), not a regular file" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/special" --num-workers 1
rm "$work/special/train/ant/0-pipe.ppm"
ln -s /dev/zero "$work/special/train/bee/0-zero.ppm"
expect 1 "0-zero.ppm: it is a character device, not a regular file" -- \
  "${bounded[@]}" "$pack" "$work/special" "$work/special-packed" --threads 1

# idx files: one that is a FIFO, not "missing"; a 64 KiB .gz that inflates to 64 MiB past the
# 48 bytes its header promises, refused once past them (its cut-off end is never reached).
mkdir -p "$work/idx"
/usr/bin/env python3 - "$work/idx" <<'PY' || failed "could not write the idx files"
import gzip, os, struct, sys
d = sys.argv[1]
def write(name, data):
    with open(os.path.join(d, name), "wb") as out:
        out.write(data)
images = struct.pack(">IIII", 0x803, 3, 4, 4) + bytes(48)
for prefix in ("train", "t10k"):
    write(prefix + "-images-idx3-ubyte", images)
    write(prefix + "-labels-idx1-ubyte", struct.pack(">II", 0x801, 3) + bytes([0, 1, 2]))
write("t10k-images-idx3-ubyte.gz", gzip.compress(images + bytes(64 << 20))[:-8])
PY
rm "$work/idx/t10k-images-idx3-ubyte"
check "the .gz is small" test "$(stat -c %s "$work/idx/t10k-images-idx3-ubyte.gz")" -lt 200000
expect 1 "t10k-images-idx3-ubyte.gz holds more than 48 bytes of data but its header says 3x4x4 = 48" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/idx"
rm "$work/idx/train-labels-idx1-ubyte"
mkfifo "$work/idx/train-labels-idx1-ubyte"
expect 1 "train-labels-idx1-ubyte is a FIFO \(named pipe\), not a regular file" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/idx"

# A file whose open never returns, as on a hung network mount, then SIGTERM: the run ends
# within seconds with the preemption exit code, naming the file.
preload="$RDDP_HANG_OPEN_LIB"
asan_options=${ASAN_OPTIONS:+$ASAN_OPTIONS:verify_asan_link_order=0}
make_folder "$work/hung"
: >"$work/out"
env RDDP_HANG_OPEN=bee/2.ppm LD_PRELOAD="$preload" ${asan_options:+ASAN_OPTIONS=$asan_options} \
  "${train[@]}" --data "$work/hung" --num-workers 1 >"$work/out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^  loader" "$work/out" && break; sleep 0.1; done
sleep 1  # the preemption handlers are installed right after the settings
start=$SECONDS
kill -TERM $job
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
kill -KILL $job 2>/dev/null  # still running: it hangs, and the checks below fail
wait $job
status=$?
check "SIGTERM ended the run stuck on a read with code 75 (status $status)" test "$status" = 75
check "within 20 s ($((SECONDS - start)) s)" test $((SECONDS - start)) -le 20
check "the message names the file being read" \
  grep -q "preempted (SIGTERM) while waiting for data: .*reading $work/hung/train/bee/2.ppm" "$work/out"

# A pack folder of an earlier run: packing again without a validation split leaves no val pack.
make_folder "$work/first"
expect 0 "val.rddp-pack: 2 images" -- "${bounded[@]}" "$pack" "$work/first" "$work/packs" --size 16 --threads 1
cp "$work/packs/val.rddp-pack" "$work/first-val.rddp-pack"
rm -r "$work/first/val"
expect 0 "train.rddp-pack: 8 images" -- "${bounded[@]}" "$pack" "$work/first" "$work/packs" --size 16 --threads 1
check "the earlier val.rddp-pack is gone" test "$(ls "$work/packs")" = train.rddp-pack
# A val pack of another run beside the train pack is refused.
cp "$work/first-val.rddp-pack" "$work/packs/val.rddp-pack"
expect 1 "val.rddp-pack' was written by another resnet_ddp_pack run than .*Run resnet_ddp_pack again" -- \
  "${bounded[@]}" "${train[@]}" --data "$work/packs" --max-steps 1

# A pack run killed while it writes (stuck on an image, then SIGKILL) leaves its temporaries;
# the next run removes them and says so.
make_folder "$work/second"
env RDDP_HANG_OPEN=bee/3.ppm LD_PRELOAD="$preload" ${asan_options:+ASAN_OPTIONS=$asan_options} \
  "$pack" "$work/second" "$work/packs" --size 16 --threads 1 >"$work/out" 2>&1 &
job=$!
for _ in $(seq 600); do [ -n "$(ls "$work/packs" | grep tmp)" ] && break; sleep 0.1; done
kill -KILL $job
wait $job 2>/dev/null
left=$(ls "$work/packs" | tr '\n' ' ')
check "the killed run left temporaries ($left)" test -n "$(ls "$work/packs" | grep tmp)"
expect 0 "removed $work/packs/rddp-pack.tmp.$job .* left by a resnet_ddp_pack run that was stopped" -- \
  "${bounded[@]}" "$pack" "$work/second" "$work/packs" --size 16 --threads 1
check "only the new pack is left" test "$(ls "$work/packs" | tr '\n' ' ')" = "train.rddp-pack val.rddp-pack "

# Control characters in a file name are escaped: the message stays one line.
make_folder "$work/names"
printf 'not an image' >"$work/names/train/ant/0-bad"$'\n'"name"$'\e'"[31m.ppm"
expect 1 'error: cannot decode image .*/0-bad\\nname\\x1b\[31m\.ppm' -- \
  "${bounded[@]}" "${train[@]}" --data "$work/names" --num-workers 1

# Files and folders the user cannot read, and an output folder they cannot write; as root,
# which may read anything, these run as nobody.
as_user=()
[ "$(id -u)" = 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
chmod 755 "$work"
make_folder "$work/locked"
mkdir -m 777 "$work/locked-out"
chmod 000 "$work/locked/train/ant/1.ppm"
expect 1 "cannot open $work/locked/train/ant/1.ppm: Permission denied" -- \
  "${as_user[@]}" "${bounded[@]}" "$pack" "$work/locked" "$work/locked-out" --threads 1
chmod 644 "$work/locked/train/ant/1.ppm"
chmod 000 "$work/locked/train/bee"
expect 1 "cannot list $work/locked/train/bee: Permission denied" -- \
  "${as_user[@]}" "${bounded[@]}" "$pack" "$work/locked" "$work/locked-out" --threads 1
chmod 755 "$work/locked/train/bee"
mkdir -m 555 "$work/readonly"
expect 1 "into $work/readonly: cannot create .*: Permission denied; choose an output folder you can" -- \
  "${as_user[@]}" "${bounded[@]}" "$pack" "$work/locked" "$work/readonly" --threads 1
finish
