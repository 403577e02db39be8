#!/usr/bin/env python3
"""Training throughput of torchvision's ResNet-18 in PyTorch: the measurement of
bench/cuda_step_bench.cpp, made the same way, for the comparison of bench/run_throughput.sh.

    pytorch_ddp.py [--mode eager|compile] [--channels-last] [--batch 256] [--size 224]
                   [--stem auto|imagenet|cifar] [--classes 1000] [--optimizer adamw|sgd]
                   [--precision tf32|fp32|bf16|fp16] [--warmup 15] [--windows 5]
                   [--steps-per-window 30] [--conv-algorithms timed|heuristic] [--ddp]
                   [--profile] [--kernel-csv FILE] [--kernel-steps N] [--srun]
    pytorch_ddp.py --describe [same flags]     the model's FLOPs and parameters, on the CPU
    torchrun --nproc-per-node 8 pytorch_ddp.py [flags]     DDP, one process per GPU
    srun --ntasks-per-node 8 pytorch_ddp.py --srun [flags]  the same, one Slurm task per GPU

The model is torchvision.models.resnet18(num_classes=C); the cifar stem replaces conv1 by a
3x3/1 convolution and maxpool by Identity, as the parity tests do (tests/parity/
test_resnet_parity.py), and `--stem auto` takes it for images up to 64 px, as resnet_ddp does.
One batch of normally distributed images and uniform labels lives on the GPU and is trained on
over and over. Precision: tf32 allows TF32 in cuDNN convolutions and cuBLAS matrix products
(torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32), fp32 forbids both,
bf16 runs forward and loss under torch.autocast(bfloat16) (TF32 allowed for what autocast keeps
in float32); fp16 the same under torch.autocast(float16), with torch.cuda.amp.GradScaler's
default dynamic loss scaling around backward and the optimizer step, as resnet_ddp's fp16. --conv-algorithms timed is torch.backends.cudnn.benchmark = True, as resnet_ddp's
default timed search. The optimizers are torch.optim's with resnet_ddp's defaults (AdamW lr
1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-2; SGD lr 0.1, momentum 0.9, weight decay
1e-4), in PyTorch's default implementation for CUDA tensors.

A single process trains the plain model; --ddp wraps it in DistributedDataParallel over NCCL in
a world of one (init_method tcp://127.0.0.1 on a free port), as resnet_ddp's --ddp adds its
reducer. Under torchrun, or srun with --srun, the model is always wrapped, and the total is every
rank's images over the slowest rank's window. --srun takes the rank, world size and local rank
from Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and meets at MASTER_ADDR:MASTER_PORT,
which the job script exports (scripts/slurm/benchmark_runs.sh: the job's first node).
--mode compile is torch.compile(model) with the default mode (after the DDP wrapper, so DDP's
graph breaks at bucket boundaries apply); compilation happens in the warm-up, which is not timed.

Warm-up steps, then windows of steps timed by CUDA events; the median window counts. One JSON
line per run (the schema of bench/results/README.md). Without a CUDA device it prints SKIPPED
and exits 0.

--kernel-csv FILE runs --kernel-steps more steps (default: a window's) after the timed ones under
torch.profiler (CUDA activity: CUPTI, as cuda_step_bench --kernel-csv traces ours) and writes
every kernel's duration summed by name to FILE as Nsight Systems' kernel summary, for
bench/profile_breakdown.py. The record names the file, or says why there is none.
"""
import argparse
import contextlib
import json
import math
import os
import socket
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torchvision

FLOPS_FORMULA = ("3 x 2 x forward MACs (convolutions and fc; BatchNorm, ReLU, pooling and "
                 "additions not counted): 2 FLOPs per multiply-add, and backward costs two "
                 "forwards (data and weights)")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--describe", action="store_true",
                        help="print the model's FLOPs and parameters (CPU) and exit")
    parser.add_argument("--mode", choices=["eager", "compile"], default="eager")
    parser.add_argument("--channels-last", action="store_true",
                        help="model and batch in torch.channels_last memory format")
    parser.add_argument("--batch", type=int, default=256, help="images per GPU and step")
    parser.add_argument("--size", type=int, default=224, help="image height and width")
    parser.add_argument("--stem", choices=["auto", "imagenet", "cifar"], default="auto")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    parser.add_argument("--precision", choices=["tf32", "fp32", "bf16", "fp16"], default="tf32")
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=30)
    parser.add_argument("--conv-algorithms", choices=["timed", "heuristic"], default="timed")
    parser.add_argument("--ddp", action="store_true",
                        help="DistributedDataParallel in a world of one (always under torchrun)")
    parser.add_argument("--srun", action="store_true",
                        help="started by srun, one task per GPU: DDP over Slurm's tasks, meeting "
                             "at MASTER_ADDR:MASTER_PORT")
    parser.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    parser.add_argument("--grad-allreduce", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: DDP's bf16_compress_hook (with DDP only; halves the bytes, "
                             "which matters with more than one GPU)")
    parser.add_argument("--kernel-csv", metavar="FILE",
                        help="after the timed steps, --kernel-steps more under torch.profiler: "
                             "each kernel's time summed by name, as nsys's kernel summary in CSV")
    parser.add_argument("--kernel-steps", type=int, default=0,
                        help="steps traced for --kernel-csv (default: a window's)")
    parser.add_argument("--profile", action="store_true",
                        help="a profiler started with nsys --capture-range=cudaProfilerApi collects "
                             "the timed windows only, each an NVTX range, as cuda_step_bench --profile")
    args = parser.parse_args(argv)
    if args.kernel_steps < 0:
        parser.error("--kernel-steps must be at least 1")
    for name in ("batch", "size", "classes", "warmup", "windows", "steps_per_window"):
        low = 2 if name == "batch" else 1
        if getattr(args, name) < low:
            parser.error(f"--{name.replace('_', '-')} must be at least {low}")
    if args.stem == "auto":
        args.stem = "cifar" if args.size <= 64 else "imagenet"
    return args


def kernel_totals(events, device_type=None):
    """{name: [total ns, launches, min ns, max ns]} of the kernels among a torch.profiler's
    events: those that ran on the device (device_type, CUDA unless given), its copies and fills
    left out as Nsight Systems' kernel summary leaves them out."""
    if device_type is None:
        device_type = torch.autograd.DeviceType.CUDA
    totals = {}
    for event in events:
        if event.device_type != device_type or event.name.startswith(("Memcpy", "Memset")):
            continue
        ns = (event.time_range.end - event.time_range.start) * 1000.0
        kernel = totals.setdefault(event.name, [0.0, 0, ns, ns])
        kernel[0] += ns
        kernel[1] += 1
        kernel[2] = min(kernel[2], ns)
        kernel[3] = max(kernel[3], ns)
    return totals


def kernel_summary_csv(totals):
    """Nsight Systems' kernel summary in CSV, as bench/kernel_summary.h writes ours: longest total
    first."""
    def quoted(text):
        return '"' + text.replace('"', '""') + '"'
    everything = sum(kernel[0] for kernel in totals.values())
    lines = ['"Time (%)","Total Time (ns)","Instances","Avg (ns)","Min (ns)","Max (ns)","Name"']
    for name, (total, launches, low, high) in sorted(totals.items(), key=lambda item: -item[1][0]):
        share = 100.0 * total / everything if everything > 0 else 0.0
        lines.append(f"{share:.1f},{total:.0f},{launches},{total / launches:.1f},{low:.0f},"
                     f"{high:.0f},{quoted(name)}")
    return "\n".join(lines) + "\n"


def trace_kernels(step, steps, steps_per_window, device, path):
    """Runs `steps` more steps under torch.profiler and writes their kernels to `path`: the
    record's fields that say so, or why not."""
    from torch.profiler import ProfilerActivity, profile
    try:
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as traced:
            for i in range(steps):
                step(i % steps_per_window)
            torch.cuda.synchronize(device)
        totals = kernel_totals(traced.events())
        if not totals:
            return {"kernel_times_error": "torch.profiler recorded no kernel"}
        with open(path, "w") as out:
            out.write(kernel_summary_csv(totals))
    except Exception as error:  # noqa: BLE001 (a trace that fails must not cost the measurement)
        return {"kernel_times_error": f"{type(error).__name__}: {error}"}
    launches = sum(kernel[1] for kernel in totals.values())
    per_step = sum(kernel[0] for kernel in totals.values()) / 1e6 / steps
    print(f"kernel times     {launches} launches of {len(totals)} kernels over {steps} steps "
          f"(torch.profiler), {per_step:.2f} ms of kernel time a step: {path}")
    return {"kernel_csv": path, "kernel_steps": steps}


def build_model(stem, classes):
    model = torchvision.models.resnet18(num_classes=classes)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


def forward_macs(model, size):
    """Multiply-adds of one image's forward pass through every Conv2d and Linear, read from the
    shapes the layers produce (forward hooks on a CPU pass of one image)."""
    macs = []

    def conv_hook(module, inputs, output):
        per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
        macs.append(output[0].numel() * per_output)

    def linear_hook(module, inputs, output):
        macs.append(output[0].numel() * module.in_features)

    hooks = [m.register_forward_hook(conv_hook) for m in model.modules()
             if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear_hook) for m in model.modules()
              if isinstance(m, nn.Linear)]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    model.train(was_training)
    for hook in hooks:
        hook.remove()
    return float(sum(macs))


def config_record(record, args, impl, model):
    return {
        "record": record, "impl": impl, "stem": args.stem, "image_size": args.size,
        "batch_per_gpu": args.batch, "classes": args.classes, "optimizer": args.optimizer,
        "precision": args.precision, "grad_allreduce": args.grad_allreduce,
        "memory_format": "channels_last" if args.channels_last else "nchw",
        "params": sum(p.numel() for p in model.parameters()),
        "flops_per_image": 6.0 * forward_macs(model, args.size), "flops_formula": FLOPS_FORMULA,
    }


def describe(args):
    model = build_model(args.stem, args.classes)
    record = config_record("describe", args, f"pytorch-{args.mode}", model)
    print(f"model            torchvision resnet18, {args.stem} stem, {args.classes} classes, "
          f"{record['params']} parameters")
    print(f"training FLOPs   {record['flops_per_image']:.4g} per image = {FLOPS_FORMULA}")
    print(json.dumps(record))


class DeviceMemoryPeak:
    """cudaMemGetInfo's memory in use, the highest seen minus what was in use once the CUDA
    context existed: what bench/device_memory.h measures for resnet_ddp, so the two compare
    (PyTorch's allocator statistics leave out the context, cuDNN's and NCCL's own allocations
    and loaded kernels). A thread samples every millisecond from start() to stop()."""

    def __init__(self, device):
        self.device = device
        self.baseline = self._in_use()
        self.peak = self.latest = self.baseline
        self._running = False
        self._thread = None

    def _in_use(self):
        free, total = torch.cuda.mem_get_info(self.device)
        return total - free

    def sample(self):
        self.latest = self._in_use()
        self.peak = max(self.peak, self.latest)

    def start(self):
        def run():
            while self._running:
                self.sample()
                time.sleep(0.001)
        self._running = True
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self):
        self._running = False
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def peak_bytes(self):
        return self.peak - self.baseline

    def latest_bytes(self):
        return self.latest - self.baseline


def free_local_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SRUN_VARIABLES = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_ADDR", "MASTER_PORT")


def srun_rendezvous(environ):
    """(rank, world size, local rank, init_method) of a task started by srun: Slurm names the
    first three; the job script exports where rank 0 listens."""
    missing = [name for name in SRUN_VARIABLES if not environ.get(name)]
    if missing:
        sys.exit(f"pytorch_ddp.py --srun: {', '.join(missing)} not set: start it with srun inside "
                 "a job, after exporting MASTER_ADDR (the job's first node: scontrol show "
                 "hostnames | head -n 1) and MASTER_PORT (a free port), as "
                 "scripts/slurm/benchmark_runs.sh does")
    try:
        rank, world, local_rank, port = (int(environ[name]) for name in (
            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_PORT"))
    except ValueError:
        sys.exit("pytorch_ddp.py --srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and "
                 "MASTER_PORT must be whole numbers, not " +
                 ", ".join(environ[name] for name in SRUN_VARIABLES if name != "MASTER_ADDR"))
    if not 0 <= rank < world or local_rank < 0:
        sys.exit(f"pytorch_ddp.py --srun: rank {rank} of {world} tasks (local rank {local_rank}) "
                 "is not a task of the step")
    return rank, world, local_rank, f"tcp://{environ['MASTER_ADDR']}:{port}"


def start_distributed(args):
    """(rank, world size, local rank, whether DDP wraps the model)."""
    if args.srun:
        rank, world, local_rank, init_method = srun_rendezvous(os.environ)
        dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world)
        return rank, world, local_rank, True
    if "WORLD_SIZE" in os.environ:  # torchrun or another env:// launcher
        dist.init_process_group("nccl")
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)), True
    if args.ddp:
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_local_port()}",
                                rank=0, world_size=1)
        return 0, 1, 0, True
    return 0, 1, 0, False


def set_precision(precision, conv_algorithms):
    allow_tf32 = precision != "fp32"
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.benchmark = conv_algorithms == "timed"


def make_optimizer(kind, parameters):
    if kind == "adamw":
        return torch.optim.AdamW(parameters, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=1e-2)
    return torch.optim.SGD(parameters, lr=0.1, momentum=0.9, weight_decay=1e-4)


def cudnn_version_text(version):
    """cuDNN packs its version as major*10000+minor*100+patch from 9 on, major*1000+... before."""
    if not version:
        return None
    major_unit = 10000 if version >= 90000 else 1000
    return f"{version // major_unit}.{version % major_unit // 100}.{version % 100}"


def versions():
    nccl = (torch.cuda.nccl.version()
            if torch.cuda.is_available() and dist.is_available() and dist.is_nccl_available()
            else None)
    return {
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": cudnn_version_text(torch.backends.cudnn.version()),
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
    }


class StepEvents:
    """CUDA events at the start of each step, after its backward and after its optimizer step:
    forward+backward, optimizer, and the GPU idling between steps while the host enqueues."""

    def __init__(self, steps):
        self.events = [[torch.cuda.Event(enable_timing=True) for _ in range(3)]
                       for _ in range(steps)]

    def window_ms(self):
        self.events[-1][2].synchronize()
        return self.events[0][0].elapsed_time(self.events[-1][2])

    def split(self):
        n = len(self.events)
        forward_backward = sum(b.elapsed_time(d) for b, d, _ in self.events) / n
        optimizer = sum(d.elapsed_time(e) for _, d, e in self.events) / n
        idle = sum(self.events[i - 1][2].elapsed_time(self.events[i][0])
                   for i in range(1, n)) / n
        return forward_backward, optimizer, idle


def measure(args):
    if not torch.cuda.is_available():
        print(f"SKIPPED: pytorch_ddp.py: torch.cuda.is_available() is False (torch "
              f"{torch.__version__}, built for CUDA {torch.version.cuda})")
        return 0
    if args.mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"pytorch_ddp.py: --mode compile needs torch.compile (PyTorch 2.0 or later); "
                 f"this is torch {torch.__version__}")
    rank, world, local_rank, ddp = start_distributed(args)
    if args.grad_allreduce != "fp32" and not ddp:
        sys.exit("pytorch_ddp.py: --grad-allreduce bf16 is a DDP communication hook: add --ddp "
                 "(or start under torchrun)")
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.cuda.init()
    set_precision(args.precision, args.conv_algorithms)
    memory = DeviceMemoryPeak(device)
    memory.start()
    torch.cuda.reset_peak_memory_stats(device)

    impl = f"pytorch-{args.mode}"
    record = config_record("throughput", args, impl, build_model(args.stem, args.classes))
    setup_start = time.perf_counter()
    model = build_model(args.stem, args.classes)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(device, memory_format=memory_format).train()
    optimizer = make_optimizer(args.optimizer, model.parameters())
    if ddp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank],
                                                    bucket_cap_mb=args.bucket_mb)
        if args.grad_allreduce == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if args.mode == "compile":
        model = torch.compile(model)
    generator = torch.Generator(device=device).manual_seed(1)
    images = torch.randn(args.batch, 3, args.size, args.size, device=device,
                         generator=generator).contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.classes, (args.batch,), device=device, generator=generator)
    setup_s = time.perf_counter() - setup_start

    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    autocast = (torch.autocast(device_type="cuda", dtype=autocast_dtype)
                if autocast_dtype is not None else contextlib.nullcontext())
    # fp16 only; disabled, its scale/step/update are plain loss.backward() and optimizer.step().
    scaler = torch.cuda.amp.GradScaler(enabled=args.precision == "fp16")
    events = StepEvents(args.steps_per_window)
    loss_sum = torch.zeros((), device=device)

    def step(index):
        nonlocal loss_sum
        begin, backward_done, end = events.events[index]
        begin.record()
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        backward_done.record()
        scaler.step(optimizer)
        scaler.update()
        end.record()
        loss_sum = loss_sum + loss.detach().float()

    warmup_start = time.perf_counter()
    for i in range(args.warmup):
        step(i % args.steps_per_window)
    torch.cuda.synchronize(device)
    warmup_s = time.perf_counter() - warmup_start
    memory.stop()

    window_ms, splits, last_loss = [], [], float("nan")
    if args.profile:
        torch.cuda.cudart().cudaProfilerStart()
    for window in range(args.windows):
        loss_sum = torch.zeros((), device=device)
        if args.profile:
            torch.cuda.nvtx.range_push(f"window {window + 1}")
        for i in range(args.steps_per_window):
            step(i)
        if args.profile:
            torch.cuda.nvtx.range_pop()
        window_ms.append(events.window_ms())
        splits.append(events.split())
        last_loss = loss_sum.item() / args.steps_per_window
        if not math.isfinite(last_loss):
            sys.exit(f"pytorch_ddp.py: the training loss became {last_loss} in window "
                     f"{window + 1}: the figures would not be those of training")
    if args.profile:
        torch.cuda.synchronize(device)
        torch.cuda.cudart().cudaProfilerStop()
    memory.sample()
    peak_bytes, end_bytes = memory.peak_bytes(), memory.latest_bytes()
    kernel_fields = {}
    if args.kernel_csv:
        # Every rank steps (DDP's collectives need them all); rank 0 writes the file.
        steps = args.kernel_steps or args.steps_per_window
        if rank == 0:
            kernel_fields = trace_kernels(step, steps, args.steps_per_window, device,
                                          args.kernel_csv)
        else:
            for i in range(steps):
                step(i % args.steps_per_window)
    allocated = torch.cuda.max_memory_allocated(device)
    reserved = torch.cuda.max_memory_reserved(device)
    forward_backward, optimizer_ms, idle = (statistics.fmean(part) for part in zip(*splits))

    if world > 1:
        times = torch.tensor(window_ms, device=device, dtype=torch.float64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        window_ms = times.tolist()
        peaks = torch.tensor([peak_bytes, end_bytes, allocated, reserved], device=device,
                             dtype=torch.float64)
        dist.all_reduce(peaks, op=dist.ReduceOp.MAX)
        peak_bytes, end_bytes, allocated, reserved = peaks.tolist()
        split = torch.tensor([forward_backward, optimizer_ms, idle], device=device,
                             dtype=torch.float64)
        dist.all_reduce(split)
        forward_backward, optimizer_ms, idle = (value / world for value in split.tolist())

    if rank == 0:
        images_per_window = world * args.batch * args.steps_per_window
        rates = [images_per_window / (ms / 1e3) for ms in window_ms]
        total = statistics.median(rates)
        step_ms = statistics.median(window_ms) / args.steps_per_window
        tflops = total / world * record["flops_per_image"] / 1e12
        gib = float(1 << 30)
        print(f"PyTorch {torch.__version__} training throughput: {impl}, batch on the device")
        print(f"device           {torch.cuda.get_device_name(device)}")
        print(f"ranks            {world}" + (" (DistributedDataParallel, NCCL)" if ddp
                                             else " (one process, no DDP)"))
        print(f"model            torchvision resnet18, {args.stem} stem, {args.classes} classes, "
              f"{record['params']} parameters, {record['memory_format']}")
        print(f"batch            {args.batch} images of 3x{args.size}x{args.size} per GPU")
        print(f"maths            {args.precision}, cudnn.benchmark "
              f"{torch.backends.cudnn.benchmark}, optimizer {args.optimizer}")
        print(f"steps            {args.warmup} warm-up ({warmup_s:.1f} s), then {args.windows} "
              f"windows of {args.steps_per_window} timed by CUDA events")
        print(f"images/s per GPU {total / world:.0f} (median window; windows "
              f"{min(rates) / world:.0f}..{max(rates) / world:.0f})")
        print(f"images/s total   {total:.0f}")
        waits = " (with DDP's communication waits)" if ddp else ""
        print(f"step             {step_ms:.2f} ms: forward+backward {forward_backward:.2f}{waits}, "
              f"optimizer {optimizer_ms:.2f}, GPU idle between steps {idle:.2f}")
        print(f"achieved         {tflops:.1f} TFLOP/s per GPU "
              f"({record['flops_per_image'] / 1e9:.3f} GFLOP per image)")
        print(f"peak memory      {peak_bytes / gib:.2f} GiB in use beyond the CUDA context "
              f"(cudaMemGetInfo, as cuda_step_bench); torch max allocated "
              f"{allocated / gib:.2f} GiB, max reserved {reserved / gib:.2f} GiB")
        print(f"last loss        {last_loss:.4f}")
        record.update({
            "status": "ok", "gpu": torch.cuda.get_device_name(device), "world_size": world,
            "ddp": ddp, "conv_algorithms": args.conv_algorithms, "warmup_steps": args.warmup,
            "windows": args.windows, "steps_per_window": args.steps_per_window,
            "images_per_s_per_gpu": total / world, "images_per_s_total": total,
            "window_images_per_s_total": rates, "step_ms": step_ms,
            # The batch is resident on the device: no data wait. DDP waits for its buckets
            # inside backward, which these events cannot tell apart from the computation.
            "split_ms": {"data": 0.0, "forward_backward": forward_backward,
                         "comm_exposed": None if ddp else 0.0, "optimizer": optimizer_ms,
                         "idle": idle},
            "tflops_per_gpu": tflops, "peak_tflops": None, "mfu": None,
            "device_mem_peak_bytes": peak_bytes, "device_mem_end_bytes": end_bytes,
            "torch_max_allocated_bytes": allocated, "torch_max_reserved_bytes": reserved,
            "setup_s": setup_s, "warmup_s": warmup_s, "last_loss": last_loss,
            "versions": versions(),
        })
        if "kernel_times_error" in kernel_fields:
            print(f"kernel times     not collected: {kernel_fields['kernel_times_error']}")
        record.update(kernel_fields)
        print(json.dumps(record))
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def main(argv):
    args = parse_args(argv)
    if args.describe:
        describe(args)
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
