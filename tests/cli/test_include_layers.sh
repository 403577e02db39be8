#!/usr/bin/env bash
# The include rules of docs/architecture.md hold for the tree, and the checker catches a break:
# a CUDA file reaching the trainer, and a kernel reaching cuDNN through a header.
source "$(dirname "$0")/lib.sh"
checker=$RDDP_SOURCE_DIR/tests/cli/include_layers.py
expect 0 "includes of [0-9]+ files follow the rules" -- python3 "$checker" "$RDDP_SOURCE_DIR"

copy=$work/tree
mkdir -p "$copy"
cp -r "$RDDP_SOURCE_DIR/src" "$RDDP_SOURCE_DIR/include" "$RDDP_SOURCE_DIR/kernels" "$copy/"
echo '#include "resnet_ddp/train/options.h"' >>"$copy/src/cuda/device.cpp"
expect 1 "src/cuda/device.cpp:[0-9]+: cuda includes train/options.h \(train\)" -- \
  python3 "$checker" "$copy"
cp "$RDDP_SOURCE_DIR/src/cuda/device.cpp" "$copy/src/cuda/device.cpp"
echo '#include <cudnn.h>' >>"$copy/include/resnet_ddp/kernel_math/pixel.h"
expect 1 "reaches #include <cudnn.h> through include/resnet_ddp/kernel_math/pixel.h" -- \
  python3 "$checker" "$copy"
mkdir "$copy/src/extra" && echo 'int x;' >"$copy/src/extra/x.cpp"
expect 1 "src/extra/x.cpp: the folder is not in the rules" -- python3 "$checker" "$copy"
finish
