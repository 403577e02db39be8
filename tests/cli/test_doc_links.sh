#!/usr/bin/env bash
# Every relative link in the project's markdown (README.md, docs/, and each folder's README)
# leads to a file that exists: a moved file must not leave a reader at a dead link.
source "$(dirname "$0")/lib.sh"
links() {
  python3 - "$1" <<'PY'
import os, re, subprocess, sys
root = sys.argv[1]
files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True,
                       check=True).stdout.split()
dead, count = [], 0
for name in files:
    text = open(os.path.join(root, name), encoding="utf-8").read()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        count += 1
        path = os.path.normpath(os.path.join(root, os.path.dirname(name), target.split("#")[0]))
        if not os.path.exists(path):
            dead.append(f"{name}: ({target}) leads nowhere")
print("\n".join(dead) if dead else f"{count} links in {len(files)} markdown files lead to files")
sys.exit(1 if dead else 0)
PY
}
expect 0 "links in [0-9]+ markdown files lead to files" -- links "$RDDP_SOURCE_DIR"
# The check itself: a dead link in a copy is found.
git -C "$RDDP_SOURCE_DIR" ls-files '*.md' | (cd "$RDDP_SOURCE_DIR" && xargs cp --parents -t "$work/")
git -C "$work" init -q && printf 'see [x](docs/none.md)\n' >"$work/dead.md" && git -C "$work" add -A
expect 1 "dead.md: \(docs/none.md\) leads nowhere" -- links "$work"
finish
