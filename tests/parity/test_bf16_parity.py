"""Our float32 -> bfloat16 rounding (include/resnet_ddp/kernel_math/bf16.h) against torch's .to(torch.bfloat16),
bit for bit, on random floats of every magnitude, subnormals, exact halfway cases, values just
either side of halfway, signed zeros, Inf, NaN, bfloat16's largest finite value and the floats
that overflow to Inf. NaN is compared as a class (both quiet NaN), since torch itself has no one
NaN pattern: its scalar conversion gives 0x7FC0, its vectorised CPU kernel 0xFFFF.

Then one rank's share under --grad-allreduce bf16 against bf16_compress_hook's own expression,
bucket.to(torch.bfloat16).div_(W): for W a power of two exactly; for other W against how
torch's CUDA kernel (where the hook runs over NCCL) divides a tensor by a scalar, a float
multiplication by the float reciprocal, while the count of values where the CPU kernel's true
division differs is reported.
Our side is the program bf16_outputs (tests/parity/tools/bf16_outputs.cpp)."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOOL = "bf16_outputs"


def find_tool():
    for root, _, files in os.walk(os.environ["RDDP_BUILD_DIR"]):
        if TOOL in files and os.access(os.path.join(root, TOOL), os.X_OK):
            return os.path.join(root, TOOL)
    return None


def ours(tool, workdir, values, *mode):
    source, target = os.path.join(workdir, "in.bin"), os.path.join(workdir, "out.bin")
    values.astype(np.float32).tofile(source)
    subprocess.run([tool, mode[0], source, target, *mode[1:]], check=True)
    return np.fromfile(target, np.uint16)


def bits_of(tensor):
    return tensor.view(torch.int16).numpy().view(np.uint16)


def test_values(rng):
    """float32 bit patterns chosen to exercise every branch of the rounding."""
    parts = [
        rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32),  # any pattern
        (rng.integers(0, 2**16, 50000).astype(np.uint32) << 16) | 0x8000,  # exactly halfway
        (rng.integers(0, 2**16, 20000).astype(np.uint32) << 16) | 0x7FFF,  # just below
        (rng.integers(0, 2**16, 20000).astype(np.uint32) << 16) | 0x8001,  # just above
        rng.integers(0, 2**23, 50000).astype(np.uint32),  # positive subnormals
        rng.integers(0, 2**23, 20000).astype(np.uint32) | 0x80000000,  # negative subnormals
        np.array([0x00000000, 0x80000000, 0x00008000, 0x00018000, 0x007FFFFF, 0x807FFFFF,
                  0x00800000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3FFFFFFF,
                  0x7F7F0000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000, 0xFF7FFFFF,
                  0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
                  0x7FBFFFFF, 0x7FFFFFFF], np.uint32),  # signed zeros, edges, Inf and NaNs
    ]
    values = np.concatenate(parts).view(np.float32)
    normal_ranges = (rng.standard_normal(100000) * np.exp(rng.uniform(-80, 80, 100000))).astype(np.float32)
    return np.concatenate([values, normal_ranges])


def compare(name, our_bits, their_bits, inputs):
    our_nan = ((our_bits & 0x7F80) == 0x7F80) & ((our_bits & 0x7F) != 0)
    their_nan = ((their_bits & 0x7F80) == 0x7F80) & ((their_bits & 0x7F) != 0)
    our_quiet = (our_bits & 0x0040) != 0
    bad = np.flatnonzero((our_nan != their_nan) | (~their_nan & (our_bits != their_bits)) | (our_nan & ~our_quiet))
    print(f"  {name}: {inputs.size} values ({int(their_nan.sum())} NaN, "
          f"{int(np.isinf(inputs).sum())} Inf inputs), {bad.size} differ")
    for i in bad[:5]:
        print(f"    input 0x{inputs.view(np.uint32)[i]:08X}: ours 0x{our_bits[i]:04X}, torch 0x{their_bits[i]:04X}")
    return bad.size == 0


def main():
    tool = find_tool()
    if tool is None:
        print(f"SKIPPED: test_bf16_parity: {TOOL} is not built under {os.environ['RDDP_BUILD_DIR']}")
        return 77
    rng = np.random.default_rng(20240)
    values = test_values(rng)
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        theirs = bits_of(torch.from_numpy(values.copy()).to(torch.bfloat16))
        ok &= compare("round: .to(torch.bfloat16)", ours(tool, workdir, values, "round"), theirs, values)
        # The overflow boundary, counted: every float from halfway above bfloat16's largest value up.
        edge = (np.arange(0x7F7F8000, 0x7F7FFFFF + 1, 97, dtype=np.uint32)).view(np.float32)
        edge_ours = ours(tool, workdir, edge, "round")
        ok &= compare("round: floats at and past bfloat16's overflow", edge_ours,
                      bits_of(torch.from_numpy(edge.copy()).to(torch.bfloat16)), edge)
        ok &= bool(np.all(edge_ours == 0x7F80))

        finite = values[np.isfinite(values)]
        for world in (2, 3, 4, 7, 8):
            bucket = torch.from_numpy(finite.copy())
            hook = bits_of(bucket.to(torch.bfloat16).div_(world))  # the hook's own expression
            mine = ours(tool, workdir, finite, "compress", str(world))
            if world & (world - 1) == 0:
                ok &= compare(f"compress W={world}: .to(torch.bfloat16).div_({world})", mine, hook, finite)
                continue
            # torch's CUDA kernel divides a bfloat16 tensor by a scalar as a float multiplication
            # by the float reciprocal, then rounds: written out with torch's float32 arithmetic.
            # (Not .mul_(1/W): on a bfloat16 tensor that first rounds the scalar to bfloat16.)
            reciprocal = torch.tensor(1.0, dtype=torch.float32) / world
            cuda_form = bits_of((bucket.to(torch.bfloat16).float() * reciprocal).to(torch.bfloat16))
            ok &= compare(f"compress W={world}: torch's CUDA div_ (float reciprocal)", mine, cuda_form, finite)
            print(f"    and torch's CPU .div_({world}) (true division): "
                  f"{int((mine != hook).sum())} of {finite.size} values differ")
    print("bf16 parity:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
