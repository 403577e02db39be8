#!/usr/bin/env bash
# Commit subjects say what changed in at most 72 characters (the why goes in the body), for
# every commit after the one named here; the history before it is left as it was written.
source "$(dirname "$0")/lib.sh"
first_checked_after=dfbe242
git=(git -C "$RDDP_SOURCE_DIR")
if ! "${git[@]}" rev-parse -q --verify "$first_checked_after^{commit}" >/dev/null 2>&1; then
  echo "SKIPPED: the history here does not reach $first_checked_after (a shallow clone, or no git)"
  exit 77
fi
long=$("${git[@]}" log --format='%h %s' "$first_checked_after..HEAD" |
  awk '{ subject = substr($0, index($0, " ") + 1); if (length(subject) > 72) print }')
[ -z "$long" ] || echo "$long"
check "every subject since $first_checked_after is at most 72 characters" test -z "$long"
finish
