"""What the image parity scripts share: test images, and the unit test program's exported case
"parity export: image transforms", which prepares images as requested and writes the bytes."""
import os
import subprocess
import sys

import numpy as np
from PIL import Image


def make_image(rng, height, width, mode):
    """Smooth shapes plus noise: both the low and the high frequencies a resize must handle."""
    y, x = np.mgrid[0:height, 0:width]
    channels = 3 if mode == "RGB" else 1
    planes = []
    for c in range(channels):
        fx, fy = rng.uniform(0.01, 0.3, size=2)
        smooth = 127 + 100 * np.sin(fx * x + c) * np.cos(fy * y)
        planes.append(smooth + rng.normal(0, 25, size=(height, width)))
    array = np.clip(np.stack(planes, axis=-1), 0, 255).astype(np.uint8)
    return Image.fromarray(array[..., 0] if channels == 1 else array, mode)


def run_export(lines, tmp):
    """Runs the exported case on these request lines; exits the script if it fails."""
    program = os.path.join(os.environ["RDDP_BUILD_DIR"], "tests", "unit_tests")
    if not os.access(program, os.X_OK):
        sys.exit(f"FAILED: {program} is missing: build the unit tests first")
    request = os.path.join(tmp, "request")
    with open(request, "w") as f:
        f.write("\n".join(lines) + "\n")
    run = subprocess.run([program, "--no-skip", "--test-case=parity export: image transforms"],
                         env=dict(os.environ, RDDP_PARITY_REQUEST=request),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAILED: {program} exited {run.returncode}:\n{run.stdout}{run.stderr}")


def mismatch(out, expected, dtype, oracle):
    """Why the values in file `out` differ from `expected`, or None when every one is equal."""
    ours = np.fromfile(out, dtype=dtype)
    if ours.size != expected.size:
        return f"{ours.size} values, {oracle} has {expected.size}"
    ours = ours.reshape(expected.shape)
    if np.array_equal(ours, expected):
        return None
    diff = np.abs(ours.astype(np.float64) - expected.astype(np.float64))
    return f"{np.count_nonzero(diff)} values differ, by up to {diff.max()}"
