"""DistributedSampler and randperm: resnet_ddp's indices against PyTorch's, for several data
set sizes, world sizes, seeds, epochs and drop_last settings. The C++ side is the unit test
program's exported case "parity export: sampler indices"."""
import os
import subprocess
import sys
import tempfile

import torch
from torch.utils.data.distributed import DistributedSampler

CASES = [  # (N, world size, seed, epoch, shuffle, drop_last)
    (10, 4, 0, 0, True, False), (10, 4, 0, 0, True, True), (10, 4, 0, 3, False, False),
    (10, 4, 0, 3, False, True), (1000, 3, 7, 0, True, False), (1000, 3, 7, 1, True, False),
    (1001, 8, 123, 5, True, True), (1001, 8, 123, 5, True, False), (5, 5, 9, 2, True, False),
    (50000, 8, 0, 0, True, False), (50000, 8, 0, 89, True, True), (60000, 3, 42, 7, True, True),
    (1281167, 16, 0, 1, True, False), (97, 1, 2**32 + 5, 0, True, False),
    (12345, 7, 2**31 - 1, 4, True, True),
]
RANDPERM = [(0, 0), (1, 0), (2, 1), (100, 2**40 + 3), (100000, 1234567)]


def pytorch_indices(n, world, seed, epoch, shuffle, drop_last):
    ranks = []
    for rank in range(world):
        sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle,
                                     seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        ranks.append(list(sampler))
    return ranks


def main():
    build = os.environ["RDDP_BUILD_DIR"]
    program = os.path.join(build, "tests", "unit_tests")
    if not os.access(program, os.X_OK):
        sys.exit(f"FAILED: {program} is missing: build the unit tests first")
    with tempfile.TemporaryDirectory() as tmp:
        request, reply = os.path.join(tmp, "request"), os.path.join(tmp, "reply")
        with open(request, "w") as f:
            for n, world, seed, epoch, shuffle, drop_last in CASES:
                f.write(f"sampler {n} {world} {seed} {epoch} {int(shuffle)} {int(drop_last)}\n")
            for n, seed in RANDPERM:
                f.write(f"randperm {n} {seed}\n")
        env = dict(os.environ, RDDP_PARITY_REQUEST=request, RDDP_PARITY_REPLY=reply)
        run = subprocess.run([program, "--no-skip", "--test-case=parity export: sampler indices"],
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"FAILED: {program} exited {run.returncode}:\n{run.stdout}{run.stderr}")
        with open(reply) as f:
            lines = [[int(v) for v in line.split()] for line in f]

    failures = 0
    for n, world, seed, epoch, shuffle, drop_last in CASES:
        expected = pytorch_indices(n, world, seed, epoch, shuffle, drop_last)
        ours, lines = lines[:world], lines[world:]
        for rank in range(world):
            if ours[rank] != expected[rank]:
                failures += 1
                first = next(i for i, (a, b) in enumerate(zip(ours[rank] + [None], expected[rank] + [None])) if a != b)
                print(f"MISMATCH N={n} W={world} seed={seed} epoch={epoch} shuffle={shuffle} "
                      f"drop_last={drop_last} rank {rank}: first difference at position {first}")
    for n, seed in RANDPERM:
        expected = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
        ours, lines = lines[0], lines[1:]
        if ours != expected:
            failures += 1
            print(f"MISMATCH randperm({n}) seed {seed}")
    compared = sum(c[1] for c in CASES) + len(RANDPERM)
    print(f"{compared - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
