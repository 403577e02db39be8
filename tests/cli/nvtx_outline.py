"""Prints the ranges an NVTX recorder log holds (tests/support/nvtx_recorder.cpp) as an outline:
one line per range, indented by its depth on its thread; a span that need not nest (start/end)
shows as '[name' where it starts and ']name' where it ends, at the depth of the moment. Threads
are numbered in the order they first open a range. Exits 1, saying why, when a thread pops a
range it never pushed, leaves ranges open, or a span ends twice or never.

  nvtx_outline.py LOG [--domain resnet_ddp]
"""
import argparse
import sys


def outline(lines, domain):
    threads = {}  # thread id -> (number, stack of open names)
    spans = {}  # span id -> name
    out = []
    problems = []

    def first_thread_depth():
        """How many ranges the first thread to open one has open now."""
        return len(next(iter(threads.values()))[1]) if threads else 0

    for number, line in enumerate(lines, 1):
        words = line.rstrip("\n").split(" ", 3)
        kind = words[0]
        if kind in ("push", "pop"):
            thread, name_domain = words[1], words[2]
            if name_domain != domain:
                continue
            index, stack = threads.setdefault(thread, (len(threads), []))
            prefix = "" if index == 0 else f"thread {index}: "
            if kind == "push":
                out.append(prefix + "  " * len(stack) + words[3])
                stack.append(words[3])
            elif not stack:
                problems.append(f"line {number}: thread {index} pops a range it never pushed")
            else:
                stack.pop()
        elif kind == "start":
            if words[2] != domain:
                continue
            spans[words[1]] = words[3]
            out.append("  " * first_thread_depth() + "[" + words[3])
        elif kind == "end":
            if words[1] not in spans:
                continue  # another domain's, or ended twice (caught below)
            out.append("  " * first_thread_depth() + "]" + spans.pop(words[1]))
        else:
            problems.append(f"line {number}: unknown record {line.strip()!r}")
    for index, stack in threads.values():
        if stack:
            problems.append(f"thread {index} left open: {', '.join(stack)}")
    for name in spans.values():
        problems.append(f"span never ended: {name}")
    return out, problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--domain", default="resnet_ddp")
    args = parser.parse_args()
    with open(args.log) as f:
        out, problems = outline(f.readlines(), args.domain)
    print("\n".join(out))
    for problem in problems:
        print("nvtx_outline.py: " + problem, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
