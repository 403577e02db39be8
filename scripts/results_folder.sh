#!/usr/bin/env bash
# The name of a measuring run's folder under bench/results, <date>-<gpu>-<commit>:
#
#   scripts/results_folder.sh GPU-NAME [COMMIT]
#
# GPU-NAME is the device's name as nvidia-smi prints it (or "cpu"); it is shortened to its
# words up to the first with a digit, without the vendor's and product line's words
# ("NVIDIA H100 80GB HBM3" -> H100, "NVIDIA GeForce RTX 4090" -> RTX-4090), so that the runs of
# one GPU sort together. COMMIT is a git hash, as long as given, optionally followed by
# " (with uncommitted changes)" as the measuring scripts write it: its first 7 characters,
# with -dirty for such a tree; left out when empty or "unknown". The date is today's, UTC.
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] && [ -n "$1" ] ||
  { echo "usage: results_folder.sh GPU-NAME [COMMIT]" >&2; exit 2; }

gpu=""
for word in $(printf '%s' "$1" | tr -c 'A-Za-z0-9' ' '); do
  case $word in NVIDIA|Nvidia|nvidia|Tesla|GeForce|Quadro) continue ;; esac
  gpu+=${gpu:+-}$word
  [[ $word != *[0-9]* ]] || break
done
# A name of vendor words alone keeps them.
[ -n "$gpu" ] || gpu=$(printf '%s' "$1" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//')

commit=""
read -r hash rest <<<"${2:-}" || true
if [[ ${hash:-} =~ ^[0-9a-fA-F]{7,}$ ]]; then
  commit=-${hash:0:7}
elif [ -n "${hash:-}" ] && [ "$hash" != unknown ]; then
  commit=-$(printf '%s' "$hash" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//')
fi
if [ -n "$commit" ] && [[ ${rest:-} == *uncommitted* ]]; then commit+=-dirty; fi

echo "$(date -u +%Y-%m-%d)-$gpu$commit"
