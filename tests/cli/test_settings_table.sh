#!/usr/bin/env bash
# The settings table at start shows what the user chose and can change; --verbose adds how the
# run works (GEMM kernel, batch buffers and malloc tuning, communication, replica check...).
# The same one-rank CPU evaluation with and without --verbose.
. "$(dirname "$0")/lib.sh"
run=("$RDDP_BIN" --dataset synthetic --device cpu --limit-train 8 --limit-val 4 --batch-size 4
     --image-size 16 --max-steps 1 --checkpoint-dir "$work/ck")
table() { sed -n '/^resnet_ddp$/,/^epoch /p' "$1"; }

expect 0 "^resnet_ddp$" -- "${run[@]}"
table "$work/out" >"$work/plain"
expect 0 "^resnet_ddp$" -- "${run[@]}" --verbose
table "$work/out" >"$work/verbose"

# has FILE PATTERN / lacks FILE PATTERN: a line of FILE matches the extended regex, or none does.
has() { grep -qE -- "$2" "$1"; }
lacks() { ! grep -qE -- "$2" "$1"; }
for row in "world size +1 rank$" "nodes +1$" "device +cpu \([^;]*; --device cpu\)$" \
           "data +synthetic" "validation +" "model +ResNet-18, stem=cifar in_channels=3" \
           "start +torchvision's, seed 0" "batch size +4 per rank, 4 effective" \
           "steps +2 per epoch x 10 epochs, at most 1" "optimizer +adamw, lr 0.001" \
           "lr schedule +constant" "precision +tf32" "memory format +nchw" \
           "loader +[0-9]+ worker thread\(s\) per rank$" "checkpoints +$work/ck$"; do
  check "the table shows /$row/" has "$work/plain" "^  $row"
  check "the verbose table shows /$row/" has "$work/verbose" "^  ${row%\$}"
done
for detail in "GEMM" "MFU" "batchnorm" "cuda graphs" "communication" "grad allreduce" \
              "replica check" "profiling" "mall(oc|opt)" "batch buffers"; do
  check "only --verbose shows /$detail/" bash -c \
    "$(declare -f has lacks); lacks '$work/plain' '$detail' && has '$work/verbose' '$detail'"
done
check "--verbose's loader row names the buffers and the malloc tuning" has "$work/verbose" \
  "^  loader +[0-9]+ worker thread\(s\) per rank, [a-z ]+ batch buffers, .*(malloc|allocator)"
check "--verbose's communication row names ranks, nodes and OpenMP threads" has "$work/verbose" \
  "^  communication +1 rank on 1 node, MPI thread level [a-z]+, [0-9]+ OpenMP threads? per rank"
check "--verbose adds rows" test "$(wc -l <"$work/verbose")" -gt "$(wc -l <"$work/plain")"
expect 0 "^  --verbose +the settings table also shows" -- "$RDDP_BIN" --help
finish
