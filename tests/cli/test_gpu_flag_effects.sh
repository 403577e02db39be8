#!/usr/bin/env bash
# What each GPU flag of resnet_ddp changes in the work the GPU is given, on the program built
# against the CUDA emulator (tests/emu/README.md): its call log (tests/emu/call_log.h) counts the
# kernels run and the cuDNN calls made, each convolution with its algorithm, determinism, math
# type and layout. One training step a run; flag_effects.txt names this test for these flags.
. "$(dirname "$0")/lib.sh"
if [ ! -x "${RDDP_EMULATED_BIN:-}" ]; then
  echo "SKIPPED: the emulated resnet_ddp was not built (its build needs mpiexec; the sanitizer" \
       "build leaves it out)"
  exit 77
fi
export RDDP_EMULATED_GPUS=1
# One step of 4 synthetic images cropped to 8x8; the same 4 validate.
step=(--dataset synthetic --batch-size 4 --image-size 8 --limit-train 4 --limit-val 4 --epochs 1)

# train NAME FLAGS...: one step; its weights NAME.rddp, its call log NAME.calls.
train() {
  local name=$1
  shift
  RDDP_EMU_CALL_LOG="$work/$name.calls" "$RDDP_EMULATED_BIN" "${step[@]}" "$@" \
    --save-weights "$work/$name.rddp" >"$work/out" 2>&1 || failed "run '$name' did not finish: $*"
}
# count_of NAME PATTERN: the summed counts of the lines whose text (after the count) matches.
count_of() { awk -v pattern="$2" '{ count = $1; $1 = ""; if (substr($0, 2) ~ pattern) sum += count }
  END { print sum + 0 }' "$work/$1.calls"; }
# some_and_none A B: A counts some calls and B none.
some_and_none() { [ "$1" -gt 0 ] && [ "$2" = 0 ]; }

train cuda --device cuda
check "--device cuda: the CUDA engine ran its convolutions through cuDNN" \
  test "$(count_of cuda '^cudnnConvolutionForward$')" -gt 0
train cpu --device cpu
check "--device cpu: the CPU engine, which asks the GPU for nothing" \
  test "$(count_of cpu '^cudnn|^kernel ')" = 0

# The defaults: NCHW convolutions, algorithms timed, cuDNN's BatchNorm, TF32 allowed, the
# legacy convolution API; backward filter's fastest algorithm is non-deterministic.
check "by default convolutions run NCHW, and none NHWC" \
  test "$(count_of cuda 'nchw$') $(count_of cuda 'nhwc$')" = "$(count_of cuda 'nchw$') 0"
train nhwc --device cuda --memory-format nhwc
check "--memory-format nhwc: every convolution runs NHWC" \
  test "$(count_of nhwc 'nchw$') $(count_of nhwc 'nhwc$')" = "0 $(count_of cuda 'nchw$')"

# Our BatchNorm's statistics kernels (kernels/batchnorm.cu).
our_batchnorm='^kernel (batch|finish)_moments_kernel$'
check "by default BatchNorm is cuDNN's, and no kernel of ours" \
  some_and_none "$(count_of cuda '^cudnnBatchNormalizationForwardTraining$')" \
                "$(count_of cuda "$our_batchnorm")"
train fused --device cuda --batchnorm fused
check "--batchnorm fused: our BatchNorm kernels, and no cuDNN BatchNorm call" \
  some_and_none "$(count_of fused "$our_batchnorm")" "$(count_of fused '^cudnnBatchNormalization')"

check "by default the algorithms are timed (Find*Ex)" test "$(count_of cuda '^cudnnFind')" -gt 0
train heuristic --device cuda --conv-algorithms heuristic
check "--conv-algorithms heuristic: cuDNN's heuristics, nothing timed" \
  some_and_none "$(count_of heuristic 'Algorithm_v7$')" "$(count_of heuristic '^cudnnFind')"

check "by default a non-deterministic algorithm runs" \
  test "$(count_of cuda ': .*non-deterministic')" -gt 0
train deterministic --device cuda --deterministic
check "--deterministic: only deterministic algorithms run, none timed" \
  test "$(count_of deterministic ': .*non-deterministic')" = 0 -a \
       "$(count_of deterministic '^cudnnFind')" = 0

check "by default the legacy API runs the convolutions" \
  test "$(count_of cuda '^cudnnBackendExecute$')" = 0
train graph_api --device cuda --conv-api graph
check "--conv-api graph: the graph API's plans run them, and no legacy convolution call" \
  some_and_none "$(count_of graph_api '^cudnnBackendExecute$')" \
                "$(count_of graph_api '^cudnnConvolution')"

check "by default (tf32) convolutions allow TF32 (default math)" \
  test "$(count_of cuda ', default math,')" -gt 0
train fp32 --device cuda --precision fp32
check "--precision fp32: strict float32, FMA math only" \
  some_and_none "$(count_of fp32 ', fma math,')" "$(count_of fp32 ', (default|tensor-op) math,')"
train bf16 --device cuda --precision bf16
check "--precision bf16: tensor-op math on 16-bit data, and other weights than tf32" \
  bash -c 'test "$1" -gt 0 && ! cmp -s "$2" "$3"' _ "$(count_of bf16 ', tensor-op math,')" \
  "$work/bf16.rddp" "$work/cuda.rddp"
finish
