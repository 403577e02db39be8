#!/usr/bin/env bash
# scripts/kernel_ptx_diff.sh on a copy of the kernels in a scratch git repository: an edit that
# leaves the code alone (a comment, which still changes nvcc's hash in the names of anonymous
# namespaces) is identical, and the base is compiled from another path, which changes that hash
# too; an edit that changes a comparison is reported with the kernels it changes and no others;
# a bad revision or file name exits 2.
. "$(dirname "$0")/lib.sh"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ ! -x "$nvcc" ]; then
  echo "SKIPPED: no nvcc (PATH or /usr/local/cuda/bin) to compile the kernels with"
  exit 77
fi
export NVCC=$nvcc
repo=$work/repo
mkdir -p "$repo/scripts"
cp -r "$RDDP_SOURCE_DIR/kernels" "$RDDP_SOURCE_DIR/include" "$repo/"
cp "$RDDP_SOURCE_DIR/scripts/kernel_ptx_diff.sh" "$repo/scripts/"
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=test -c user.email=test@localhost commit -qm base
tool=("$repo/scripts/kernel_ptx_diff.sh" HEAD maxpool.cu)

expect 0 "^maxpool.cu: identical$" -- "${tool[@]}"
sed -i '1i // A comment: the same code, another hash of the file.' "$repo/kernels/maxpool.cu"
expect 0 "^maxpool.cu: identical$" -- "${tool[@]}"

# A tie now moves the choice to the later element: both forward kernels change, backward not.
sed -i 's/value > best.value/value >= best.value/' "$repo/kernels/maxpool.cu"
expect 1 "^maxpool.cu: DIFFERS" -- "${tool[@]}"
check "the NCHW and NHWC forward kernels are named, in all three types, of stored and normalised inputs" \
  test "$(grep -cE 'maxpool_forward(_nhwc)?_kernel<(float|__half|__nv_bfloat16), (true|false)>' "$work/out")" = 12
check "no backward kernel is named" bash -c "! grep -q backward '$work/out'"

expect 2 "'no-such-revision' is not a revision" -- \
  "$repo/scripts/kernel_ptx_diff.sh" no-such-revision
expect 2 "no kernels/none.cu at HEAD or in the working tree" -- \
  "$repo/scripts/kernel_ptx_diff.sh" HEAD none.cu
finish
