#!/usr/bin/env python3
"""Takes bench/pytorch_ddp.py's place in the benchmark job test, where PyTorch has no GPU: started
by srun with --srun, it checks what pytorch_ddp.py would need from the step (Slurm's rank
variables, the job script's MASTER_ADDR and MASTER_PORT), and rank 0 prints the line of its
arguments and a throughput record of pytorch_ddp.py's schema. Its images/s are made up and
known: 40 per GPU on one GPU, 36 per GPU (90 %) on more."""
import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--srun", action="store_true")
parser.add_argument("--batch", type=int, required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--classes", type=int, required=True)
parser.add_argument("--precision", required=True)
parser.add_argument("--warmup", type=int, required=True)
parser.add_argument("--steps-per-window", type=int, required=True)
parser.add_argument("--windows", type=int, required=True)
parser.add_argument("--channels-last", action="store_true")
args = parser.parse_args()

if not args.srun:
    sys.exit("stand-in pytorch_ddp.py: started without --srun")
missing = [name for name in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_ADDR",
                             "MASTER_PORT") if not os.environ.get(name)]
if missing:
    sys.exit(f"stand-in pytorch_ddp.py: {', '.join(missing)} not set")
world = int(os.environ["SLURM_NTASKS"])
if os.environ["SLURM_PROCID"] == "0":
    per_gpu = 40.0 if world == 1 else 36.0
    print(f"stand-in pytorch_ddp.py: {world} ranks, arguments {' '.join(sys.argv[1:])}")
    print(f"images/s total   {per_gpu * world:.0f}")
    print(json.dumps({
        "record": "throughput", "impl": "pytorch-eager", "status": "ok", "gpu": "stand-in",
        "world_size": world, "ddp": True, "batch_per_gpu": args.batch,
        "image_size": args.size, "classes": args.classes, "precision": args.precision,
        "memory_format": "channels_last" if args.channels_last else "nchw",
        "warmup_steps": args.warmup, "windows": args.windows,
        "steps_per_window": args.steps_per_window, "images_per_s_per_gpu": per_gpu,
        "images_per_s_total": per_gpu * world,
        "versions": {"torch": "stand-in", "torchvision": "stand-in"}}))
