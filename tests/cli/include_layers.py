"""Checks the include rules of docs/architecture.md ("Folders and what each may include").

Usage: include_layers.py SOURCE_DIR. Prints each include that breaks a rule and exits 1, or
prints how many includes it checked and exits 0.

A file belongs to the part named by its folder (src/cuda/x.cpp and include/resnet_ddp/cuda/x.h
both to "cuda"); the files directly under src/ and include/resnet_ddp/ are "core", except the
few that join the parts, named in JOINERS.
"""
import os
import re
import sys

# part: the parts whose headers it may include (its own always). "core" is the neutral layer:
# the model, the engine interface, files, errors.
MAY_INCLUDE = {
    "kernel_math": set(),
    "core": {"kernel_math"},
    "data": {"core", "kernel_math"},
    "cpu": {"core", "kernel_math", "data"},
    "cuda": {"core", "kernel_math"},
    "kernels": {"core", "kernel_math", "cuda"},
    "ddp": {"core", "kernel_math", "cuda"},
    "joiner": {"core", "kernel_math", "data", "cpu", "cuda"},
    "train": {"core", "kernel_math", "data", "cpu", "cuda", "ddp", "joiner"},
    "tools": {"core", "data"},
    "main": {"core", "train", "ddp"},
}
# core headers kernel_math may use: the shapes both a kernel and its CPU twin take.
KERNEL_MATH_CORE = {"layer_shapes.h"}
# Files under src/ or include/resnet_ddp/ that join parts: the engine factory picks the CPU or
# the CUDA engine; library_versions reports the image decoders' libraries among the others.
JOINERS = {"engine_factory", "library_versions"}
# Libraries a kernel file must not reach, directly or through the headers it includes: a
# kernel is compiled by nvcc alone and needs the CUDA runtime only.
LIBRARY_HEADERS = re.compile(r"#\s*include\s*<(cudnn[^>]*|cublas[^>]*|nccl[^>]*|mpi[^>]*)>")
INCLUDE = re.compile(r'#\s*include\s*"resnet_ddp/([^"]+)"')


def part_of(path):
    parts = path.split("/")
    if parts[0] == "kernels":
        return "kernels"
    rest = parts[2:] if parts[0] == "include" else parts[1:]
    if len(rest) > 1:
        return rest[0]
    stem = os.path.splitext(rest[0])[0]
    if stem == "main":
        return "main"
    return "joiner" if stem in JOINERS else "core"


def target_part(include):
    pieces = include.split("/")
    if len(pieces) > 1:
        return pieces[0]
    stem = os.path.splitext(pieces[0])[0]
    return "joiner" if stem in JOINERS else "core"


def sources(root):
    for top in ("src", "include", "kernels"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    yield os.path.relpath(os.path.join(folder, name), root)


def main():
    root = sys.argv[1]
    broken, checked = [], 0
    texts = {path: open(os.path.join(root, path), encoding="utf-8").read() for path in sources(root)}
    for path, text in texts.items():
        part = part_of(path)
        if part not in MAY_INCLUDE:
            broken.append(f"{path}: the folder is not in the rules; add it to MAY_INCLUDE "
                          "and to docs/architecture.md")
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = INCLUDE.match(line.strip())
            if not match:
                continue
            checked += 1
            target = target_part(match.group(1))
            allowed = target == part or target in MAY_INCLUDE[part]
            if part == "kernel_math" and target == "core":
                allowed = match.group(1) in KERNEL_MATH_CORE
            if not allowed:
                broken.append(f"{path}:{number}: {part} includes {match.group(1)} ({target})")
    # Kernel files and every project header they reach: no library header.
    def reached(path, seen):
        if path in seen or path not in texts:
            return
        seen.add(path)
        for line in texts[path].splitlines():
            match = INCLUDE.match(line.strip())
            if match:
                reached(os.path.join("include", "resnet_ddp", match.group(1)), seen)
            elif line.strip().startswith('#include "'):
                reached(os.path.join(os.path.dirname(path), line.split('"')[1]), seen)
    for path in texts:
        if not path.endswith(".cu") or not path.startswith("kernels/"):
            continue
        seen = set()
        reached(path, seen)
        for header in sorted(seen):
            for line in texts[header].splitlines():
                if LIBRARY_HEADERS.match(line.strip()):
                    broken.append(f"{path} reaches {line.strip()} through {header}")
    for line in broken:
        print(line)
    if broken:
        print(f"{len(broken)} includes break the rules of docs/architecture.md")
        return 1
    print(f"{checked} includes of {len(texts)} files follow the rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
