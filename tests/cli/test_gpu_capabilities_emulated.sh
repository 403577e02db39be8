#!/usr/bin/env bash
# resnet_ddp --device cuda on GPUs it must treat by what they can compute: the program built
# against the CUDA emulator (tests/emu/README.md), its device described as a V100 (compute
# capability 7.0, 80 SMs: no bfloat16 and no TF32 tensor cores) and as an A100. On the V100
# --precision bf16 is refused before the data is opened, with the fix; fp16 and tf32 train, the settings
# table saying that tf32 computes in plain float32 there, and MFU is taken against the V100's
# own peaks (fp16 tensor cores; float32 for tf32). On the A100 bf16 trains against its peak. A
# build without code for the GPU is refused with the rebuild.
. "$(dirname "$0")/lib.sh"
if [ ! -x "${RDDP_EMULATED_BIN:-}" ]; then
  echo "SKIPPED: the emulated resnet_ddp was not built (its build needs mpiexec; the sanitizer build leaves it out)"
  exit 77
fi
export RDDP_EMULATED_GPUS=1
# One step of 8 synthetic 16x16 images: what is checked is the set-up, not the training.
run=("$RDDP_EMULATED_BIN" --dataset synthetic --device cuda --batch-size 8 --limit-train 8
     --limit-val 8 --image-size 16 --epochs 1 --conv-algorithms heuristic)
v100() {
  RDDP_EMULATED_CC=7.0 RDDP_EMULATED_GPU_NAME="Tesla V100-SXM2-32GB" RDDP_EMULATED_SMS=80 "$@"
}
a100() {
  RDDP_EMULATED_CC=8.0 RDDP_EMULATED_GPU_NAME="NVIDIA A100-SXM4-80GB" RDDP_EMULATED_SMS=108 "$@"
}
no_training() { ! grep -qE "^epoch |^  precision " "$work/out"; }

expect 1 "error: --precision bf16 needs a GPU of compute capability 8.0 or later \(bfloat16 tensor cores: A100, H100, H200\), but cuda:0 is a Tesla V100-SXM2-32GB of compute capability 7.0: use --precision fp16 on V100" -- \
  v100 "${run[@]}" --precision bf16
check "bf16 on the V100 stops before the settings table and any step" no_training
# Before the data too: given a data folder that is not there, the GPU is what it names.
expect 1 "use --precision fp16 on V100" -- v100 "$RDDP_EMULATED_BIN" --data "$work/no-such-data" \
  --device cuda --precision bf16
check "the data folder was not looked at" bash -c '! grep -q "no-such-data" "$1"' _ "$work/out"
# The refusal is the engine's, so the benchmark gets it too, before it times anything.
if [ -x "${RDDP_EMULATED_STEP_BENCH:-}" ]; then
  expect 1 "use --precision fp16 on V100" -- \
    v100 "$RDDP_EMULATED_STEP_BENCH" --size 32 --batch 4 --classes 10 --precision bf16 --warmup 1 \
    --windows 1 --steps-per-window 1 --conv-algorithms heuristic
  check "the benchmark measured nothing" bash -c '! grep -q "images/s" "$1"' _ "$work/out"
fi

expect 0 "epoch 1/1: train loss [0-9.]+ " -- v100 "${run[@]}" --precision fp16
check "fp16 on the V100: float16 tensor cores in the settings table" \
  grep -qE "^  precision +fp16: float16 tensor cores with float32 accumulation" "$work/out"
check "fp16 on the V100: MFU against its 125 TFLOP/s of float16 tensor cores" \
  grep -qE "^  MFU +against 125.0 TFLOP/s dense fp16, V100 SXM2 at 1530 MHz \(NVIDIA Tesla V100 datasheet" \
  "$work/out"
check "fp16 on the V100: the device is named as it reports itself" \
  grep -qE "^  device +cuda \(cuda:0 \(Tesla V100-SXM2-32GB\)" "$work/out"
# The first step overflows GradScaler's initial scale and is skipped; the advice that follows
# offers bf16 only where the GPU has it.
check "fp16 on the V100: the advice on skipped steps offers bf16 only from compute capability 8.0" \
  grep -qE "fp16 overflows: try a lower --lr, or --precision bf16 on a GPU of compute capability 8.0 or later$" \
  "$work/out"

expect 0 "epoch 1/1: train loss [0-9.]+ " -- v100 "${run[@]}" --precision tf32
check "tf32 on the V100: the settings table says it is plain float32" \
  grep -qE "^  precision +tf32: plain float32 \(this GPU has no TF32 units\), " "$work/out"
check "tf32 on the V100: MFU against the float32 peak, saying why" \
  grep -qE "^  MFU +against 15.7 TFLOP/s dense fp32 \(tf32 computes in plain float32 here: the V100 SXM2 has no TF32 units\), V100 SXM2 at 1530 MHz" \
  "$work/out"

expect 0 "epoch 1/1: train loss [0-9.]+ " -- v100 "${run[@]}" --precision fp32 --max-steps 1
check "fp32 on the V100: MFU against 15.7 TFLOP/s" \
  grep -qE "^  MFU +against 15.7 TFLOP/s dense fp32, V100 SXM2" "$work/out"

# An A100 has bfloat16 and TF32 tensor cores.
expect 0 "epoch 1/1: train loss [0-9.]+ " -- a100 "${run[@]}" --precision bf16
check "bf16 on the A100: bfloat16 tensor cores, MFU against 312 TFLOP/s" \
  grep -qzE "MFU +against 312.0 TFLOP/s dense bf16, A100 at 1410 MHz.*precision +bf16: bfloat16 tensor cores" \
  "$work/out"
expect 0 "epoch 1/1: train loss [0-9.]+ " -- a100 "${run[@]}" --precision tf32 --max-steps 1
check "tf32 on the A100: TF32 tensor cores, MFU against 156 TFLOP/s" \
  grep -qzE "MFU +against 156.0 TFLOP/s dense tf32, A100 at 1410 MHz.*precision +tf32: TF32 tensor cores" \
  "$work/out"

# A build without code for the GPU (the emulator answers as the runtime does for one) is refused
# when the engine is made, naming the rebuild, before any kernel is launched.
expect 1 "error: this resnet_ddp has no kernels that cuda:0, a Tesla V100-SXM2-32GB of compute capability 7.0, can run: it was built for other GPUs. Rebuild it with -DCMAKE_CUDA_ARCHITECTURES=70 and a CUDA 12 toolkit" -- \
  v100 env RDDP_EMULATED_NO_KERNEL_IMAGE=1 "${run[@]}" --precision fp16
check "a build without kernels for the GPU stops before the settings table" no_training

# A setting the emulator cannot read is refused, not taken for another GPU.
expect 2 "RDDP_EMULATED_CC='seven' is not a compute capability" -- \
  env RDDP_EMULATED_CC=seven "${run[@]}" --precision fp16
finish
