#!/usr/bin/env bash
# Whether a change to our CUDA kernels changes the code the GPU runs, without a GPU: compiles
# every kernels/*.cu to PTX as the Release build does (-O3 -DNDEBUG, one architecture) at a
# base revision and in the working tree, and compares them kernel by kernel.
#   scripts/kernel_ptx_diff.sh              the working tree against HEAD
#   scripts/kernel_ptx_diff.sh main~3       ... against another revision
#   scripts/kernel_ptx_diff.sh HEAD maxpool.cu batchnorm.cu    only these files of kernels/
# Identical PTX means identical machine code (ptxas sees the same input), so a refactor that
# passes this needs no new GPU measurement. Names in anonymous namespaces carry a hash of the
# file's path and text, which any edit changes; they are compared without it (as
# rddp::cuda::_ANON_). Comment lines are ignored.
# Prints one line a file (identical, or each kernel whose PTX differs, with its instruction
# counts before and after); exits 0 when every file is identical, 1 when one differs, 2 on
# errors. Environment: RDDP_CUDA_ARCHS (default 90; the first is used), NVCC.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-HEAD}
[ $# -eq 0 ] || shift
arch=${RDDP_CUDA_ARCHS:-90}
arch=${arch%%;*}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "kernel_ptx_diff.sh: no nvcc (set NVCC=/path/to/nvcc)" >&2; exit 2; }
git -C "$root" rev-parse --verify -q "$base^{commit}" >/dev/null ||
  { echo "kernel_ptx_diff.sh: '$base' is not a revision of $root" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/base" "$work/ptx"
git -C "$root" archive "$base" kernels include | tar -x -C "$work/base"

# ptx TREE FILE OUT: FILE of TREE as PTX, hashes and comments removed.
ptx() {
  "$nvcc" -ptx -arch="sm_$arch" -O3 -DNDEBUG -std=c++17 -I"$1/include" -I"$1/kernels" \
    -o "$3.raw" "$1/kernels/$2" || return 1
  # nvcc names an anonymous namespace <length>_GLOBAL__N__<hash of the file's path and text>,
  # and prefixes function-local statics (shared memory arrays) with <length>_INTERNAL_<hash>;
  # each becomes one fixed name of its own length, so the names stay well-formed for c++filt.
  # Branch labels ($L__BB<function>_<block>) number the functions of the file in order, which a
  # function added or removed before a kernel renumbers; the block number alone is kept.
  perl -pe 's/(\d+)(_GLOBAL__N__|_INTERNAL_)(??{ ".{" . ($1 - length($2)) . "}" })/
            $2 eq "_INTERNAL_" ? "9_INTERNAL" : "6_ANON_"/gex; s/\$L__BB\d+_/\$L__BB_/g' "$3.raw" |
    grep -v '^//' >"$3"
}

# The awk that names the kernel a PTX line belongs to: the word after .entry (".visible .entry
# name(" for kernels with external linkage, ".entry name(" for the others).
entry_awk='/\.entry/ {
  for (i = 1; i < NF; ++i) if ($i == ".entry") name = $(i + 1)
  sub(/\($/, "", name)
}'

# counts PTX: each entry's name and its number of instructions.
counts() {
  awk "$entry_awk"'
       /^\t[a-z@]/ && name != "" { n[name]++ }
       END { for (k in n) print k, n[k] }' "$1" | sort
}

status=0
if [ $# -gt 0 ]; then
  files="$*"
else
  files=$( (cd "$root/kernels" && ls -- *.cu; cd "$work/base/kernels" && ls -- *.cu) 2>/dev/null |
    sort -u)
fi
for file in $files; do
  if [ ! -f "$work/base/kernels/$file" ] && [ ! -f "$root/kernels/$file" ]; then
    echo "kernel_ptx_diff.sh: no kernels/$file at $base or in the working tree" >&2
    exit 2
  fi
  if [ ! -f "$work/base/kernels/$file" ]; then
    echo "$file: new (not at $base)"; status=1; continue
  fi
  if [ ! -f "$root/kernels/$file" ]; then echo "$file: removed since $base"; status=1; continue; fi
  ptx "$work/base" "$file" "$work/ptx/$file.base" ||
    { echo "$file: does not compile at $base" >&2; exit 2; }
  ptx "$root" "$file" "$work/ptx/$file.now" || { echo "$file: does not compile" >&2; exit 2; }
  if cmp -s "$work/ptx/$file.base" "$work/ptx/$file.now"; then
    echo "$file: identical"
    continue
  fi
  status=1
  echo "$file: DIFFERS (instructions at $base -> now, per kernel whose PTX changed):"
  # A kernel differs when its body does; compare each entry's text on its own.
  for side in base now; do
    mkdir -p "$work/ptx/$file.$side.d"
    awk -v dir="$work/ptx/$file.$side.d" "$entry_awk"'
      name != "" { print > (dir "/" name) }' "$work/ptx/$file.$side"
  done
  changed=0
  while read -r kernel before after; do
    if ! cmp -s "$work/ptx/$file.base.d/$kernel" "$work/ptx/$file.now.d/$kernel" 2>/dev/null; then
      echo "  $before -> $after  $(echo "$kernel" | c++filt 2>/dev/null || echo "$kernel")"
      changed=1
    fi
  done < <(join -a1 -a2 -e - -o 0,1.2,2.2 <(counts "$work/ptx/$file.base") \
             <(counts "$work/ptx/$file.now"))
  [ $changed = 1 ] || echo "  no kernel's body: only what lies outside them (declarations, globals)"
done
exit $status
