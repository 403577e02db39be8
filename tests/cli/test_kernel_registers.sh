#!/usr/bin/env bash
# Our BatchNorm kernels keep the occupancy they were given
# (bench/results/2026-11-28-H100-fa60b96/predictions-H100-2026-11-27.md, section 14): by `ptxas -v`
# for sm_90, the kernels of the fastest path (16-bit NHWC, 16-byte loads) use few enough registers
# that two blocks of 256 threads fit an SM for the backward passes and three for the output pass
# without a residual, and none spills. A runtime
# branch whose values every launch holds (how the backward kernels had 155 to 164 registers, one
# block an SM) fails it. Registers are a property of the compiled code, not a timing: this
# needs no GPU.
source "$(dirname "$0")/lib.sh"
nvcc=${RDDP_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "SKIPPED: no nvcc to compile kernels/batchnorm.cu with (set RDDP_NVCC)"
  exit 77
fi
"$nvcc" -std=c++17 -arch=sm_90 -O3 -DNDEBUG -Xptxas -v -I"$RDDP_SOURCE_DIR/include" \
  -I"$RDDP_SOURCE_DIR/kernels" -c "$RDDP_SOURCE_DIR/kernels/batchnorm.cu" -o "$work/batchnorm.o" \
  >"$work/ptxas.txt" 2>&1 || failed "nvcc could not compile kernels/batchnorm.cu: $(tail -5 "$work/ptxas.txt")"

# One line a kernel: registers, spilled bytes, demangled name without its parameters.
awk '/Compiling entry function/ { match($0, /_Z[A-Za-z0-9_]+/); name = substr($0, RSTART, RLENGTH) }
     /spill stores/ { spill = $5 + 0 }
     /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); print substr($0, RSTART + 5, RLENGTH - 5), spill, name }' \
  "$work/ptxas.txt" | while read -r registers spill name; do
  printf '%s %s %s\n' "$registers" "$spill" "$(c++filt "$name" | sed 's/rddp::cuda::(anonymous namespace):://; s/(.*//')"
done >"$work/kernels.txt"
check "ptxas reported the BatchNorm kernels ($(wc -l <"$work/kernels.txt") of them)" \
  grep -q 'grad_sums_kernel<__nv_bfloat16, 8, true' "$work/kernels.txt"

# blocks_per_sm REGISTERS: blocks of 256 threads an SM's 65,536 registers hold, registers being
# allocated 8 a thread at a time.
blocks_per_sm() { echo $((65536 / ((($1 + 7) / 8 * 8) * 256))); }

# expect_blocks MIN PATTERN: every kernel matching PATTERN fits MIN blocks an SM and spills nothing.
expect_blocks() {
  local min=$1 pattern=$2 found=0 registers spill name
  while read -r registers spill name; do
    [[ $name =~ $pattern ]] || continue
    found=$((found + 1))
    [ "$(blocks_per_sm "$registers")" -ge "$min" ] ||
      failed "$name: $registers registers a thread, $(blocks_per_sm "$registers") block(s) of 256 an SM; at least $min expected"
    [ "$spill" = 0 ] || failed "$name spills $spill bytes"
  done < <(sed 's/ void / /' "$work/kernels.txt")
  check "$found kernels matching /$pattern/ fit $min blocks of 256 threads an SM, without spills" \
    [ "$found" -gt 0 ]
}

expect_blocks 2 '^(grad_sums|data_grad)_kernel<(__nv_bfloat16|__half), 8, true, (true|false)>$'
expect_blocks 2 '^normalize_kernel<(__nv_bfloat16|__half), 8, true, true>$'
expect_blocks 3 '^normalize_kernel<(__nv_bfloat16|__half), 8, true, false>$'
expect_blocks 3 '^(grad_sums|data_grad|normalize)_kernel<float, 4, true, .*>$'
expect_blocks 3 '^batch_moments_kernel<(__nv_bfloat16|__half), 8, true>$'
finish
