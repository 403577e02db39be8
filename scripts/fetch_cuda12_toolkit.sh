#!/usr/bin/env bash
# Assembles a CUDA 12 toolkit in NVIDIA's layout (bin/nvcc, include, lib64, nvvm) from Debian 13
# ("trixie") non-free packages, plus cuDNN 9 and NCCL 2 from their CUDA 12 wheels on PyPI, without
# installing anything system-wide: a private apt configuration downloads the packages and
# dpkg-deb unpacks them. Only what compiling and linking needs is kept; the downloads are
# deleted and the result is reused while its recipe line matches.
#   scripts/fetch_cuda12_toolkit.sh DIR    prints the lines CUDA12_ROOT=, CUDNN_ROOT=, NCCL_ROOT=
# Environment: RDDP_DEBIAN_MIRROR (default: the first mirror of this machine's apt sources).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: fetch_cuda12_toolkit.sh DIR}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
toolkit=$dest/cuda12
wheels=$dest/cuda12-wheels
packages=(nvidia-cuda-toolkit nvidia-cuda-dev libcudart12 libcublas12 libcublaslt12 libcu++-dev)
wheel_specs=('nvidia-cudnn-cu12==9.*' 'nvidia-nccl-cu12==2.*')
# Bump the layout when what is kept or where it goes changes: a cache of another recipe is
# assembled again.
recipe="layout 1; trixie: ${packages[*]}; PyPI: ${wheel_specs[*]}"
stamp=$toolkit/.assembled

say() { echo "fetch_cuda12_toolkit.sh: $*" >&2; }

print_roots() {
  echo "CUDA12_ROOT=$toolkit"
  echo "CUDNN_ROOT=$wheels/nvidia/cudnn"
  echo "NCCL_ROOT=$wheels/nvidia/nccl"
}

if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$recipe" ]; then
  say "reusing $toolkit ($(sed -n 2p "$stamp"))"
  print_roots
  exit 0
fi
rm -rf "$toolkit" "$wheels" "$dest/downloads"
# Two gigabytes of archives, not kept: the assembled toolkit is the cache.
trap 'rm -rf "$dest/downloads"' EXIT

# The mirror of this machine's own Debian sources (deb822 or one-line format), not the
# security archive, which has no non-free CUDA packages.
mirror_of_this_machine() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    awk 'BEGIN { RS = ""; FS = "\n" }
         { uri = ""; security = 0
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^URIs:/) { split($i, f, " "); uri = f[2] }
             if ($i ~ /^Suites:.*security/) security = 1 }
           if (uri != "" && !security) { print uri; exit } }' \
      /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then
    awk '$1 == "deb" && !/security/ {
           for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
      /etc/apt/sources.list
  fi
}
mirror=${RDDP_DEBIAN_MIRROR:-$(mirror_of_this_machine)}
[ -n "$mirror" ] || {
  say "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list;"
  say "set RDDP_DEBIAN_MIRROR (e.g. http://deb.debian.org/debian)"
  exit 1
}

apt_dir=$dest/downloads/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/preferences.d" \
  "$dest/downloads/debs" "$dest/downloads/wheels"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $mirror trixie main contrib non-free" >"$apt_dir/sources.list"
: >"$apt_dir/status"
apt_options=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
             -o "Dir::Etc::SourceParts=$apt_dir/none" -o "Dir::Etc::Preferences=$apt_dir/none"
             -o "Dir::Etc::PreferencesParts=$apt_dir/preferences.d"
             -o "Dir::State=$apt_dir" -o "Dir::State::status=$apt_dir/status"
             -o "Dir::Cache=$apt_dir" -o Acquire::Retries=3)
# As root, apt hands downloads to the _apt user, who cannot write into a build folder.
[ "$(id -u)" -ne 0 ] || apt_options+=(-o APT::Sandbox::User=root)

log=$dest/downloads/log
# apt-get update exits 0 when it could fetch nothing: the package lists tell.
if ! apt-get "${apt_options[@]}" update >"$log" 2>&1 ||
    ! compgen -G "$apt_dir/lists/*_dists_trixie_non-free_*Packages*" >/dev/null; then
  cat "$log" >&2
  say "cannot read Debian trixie's package lists from $mirror (apt-get's output above):"
  say "the mirror is unreachable or lacks trixie non-free; set RDDP_DEBIAN_MIRROR to another."
  exit 1
fi
if ! (cd "$dest/downloads/debs" && apt-get "${apt_options[@]}" download "${packages[@]}") \
    >"$log" 2>&1; then
  cat "$log" >&2
  say "cannot download ${packages[*]} from $mirror (apt-get's output above): is it reachable?"
  exit 1
fi

python=$("$root/scripts/find_python.sh" pip) || {
  say "pip is needed to download cuDNN's and NCCL's CUDA 12 wheels (Debian: python3-pip)"
  exit 1
}
if ! "$python" -m pip download --no-deps --only-binary=:all: --no-cache-dir --quiet \
    --dest "$dest/downloads/wheels" "${wheel_specs[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  say "cannot download ${wheel_specs[*]} from PyPI (pip's output above): is it reachable?"
  exit 1
fi

# Unpack: the small packages whole, of nvidia-cuda-dev (2.5 GB of mostly static libraries) only
# the headers and what links the runtime and cuBLAS.
unpacked=$dest/downloads/unpacked
mkdir -p "$unpacked"
for deb in "$dest"/downloads/debs/*.deb; do
  case $deb in
    */nvidia-cuda-dev_*)
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$unpacked" --wildcards './usr/include/*' \
        './usr/lib/x86_64-linux-gnu/libcudart*' './usr/lib/x86_64-linux-gnu/libcublas*.so' \
        './usr/lib/x86_64-linux-gnu/libcudadevrt.a' './usr/lib/x86_64-linux-gnu/libculibos.a' \
        './usr/lib/x86_64-linux-gnu/stubs/libcuda.so' ;;
    *) dpkg-deb -x "$deb" "$unpacked" ;;
  esac
done

# Debian spreads the toolkit over /usr and reads /etc/nvcc.profile; NVIDIA's layout keeps it in
# one folder whose bin/nvcc.profile names everything relative to nvcc, which CMake and
# FindCUDAToolkit understand. Debian's g++ wrapper (which prefers g++-13) is left out: nvcc
# runs the g++ on PATH, which CUDA 12.4 accepts up to GCC 13.
usr=$unpacked/usr
tools=$usr/lib/nvidia-cuda-toolkit
mkdir -p "$toolkit/bin" "$toolkit/nvvm/bin" "$toolkit/lib64/stubs"
cp -a "$tools/bin/nvcc" "$tools/bin/crt" "$toolkit/bin/"
for program in ptxas fatbinary nvlink cudafe++ bin2c cu++filt nvprune cuobjdump; do
  cp -a "$usr/bin/$program" "$toolkit/bin/"
done
cp -a "$tools/bin/cicc" "$toolkit/nvvm/bin/"
cp -a "$tools/libdevice" "$toolkit/nvvm/libdevice"
cp -a "$usr/include" "$toolkit/include"
cp -a "$usr"/lib/x86_64-linux-gnu/lib* "$toolkit/lib64/"
cp -a "$usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$toolkit/lib64/stubs/"
cat >"$toolkit/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF

# The wheels in their installed layout (site-packages/nvidia/{cudnn,nccl}); of cuDNN only the
# library programs link, whose engines it loads at run time, which nothing here reaches.
"$python" - "$wheels" "$dest"/downloads/wheels/*.whl <<'EOF'
import sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith("nvidia/nccl/") or name.startswith("nvidia/cudnn/include/") \
                    or name == "nvidia/cudnn/lib/libcudnn.so.9":
                archive.extract(name, dest)
EOF

versions=$(cd "$dest/downloads" && { for deb in debs/*.deb; do
  echo "$(dpkg-deb -f "$deb" Package)=$(dpkg-deb -f "$deb" Version)"; done; ls wheels; } |
  paste -sd' ')
printf '%s\n%s\n' "$recipe" "$versions" >"$stamp"
say "assembled $toolkit from $versions"
print_roots
