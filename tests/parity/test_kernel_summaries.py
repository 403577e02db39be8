"""The kernel summaries bench/pytorch_ddp.py --kernel-csv writes (from torch.profiler) and
cuda_step_bench --kernel-csv writes (bench/kernel_summary.h, from CUPTI): the same CSV for the same
kernels, and one bench/profile_breakdown.py reads as Nsight Systems' own.

The GPU's kernels cannot be traced here. What can: the summing and the CSV on stand-in events,
compared with the exact text tests/unit/test_kernel_summary.cpp expects of the C++ writer for the
same launches; and the summing on a real torch.profiler trace of CPU operators, which has the
event objects (name, device_type, time_range) a CUDA trace has.
"""
import os
import sys
import tempfile
from types import SimpleNamespace

import torch
import torch.nn.functional as F

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import numbered_checks  # noqa: E402
import profile_breakdown  # noqa: E402
import pytorch_ddp  # noqa: E402
from numbered_checks import check  # noqa: E402



def event(name, start_us, end_us, device_type):
    return SimpleNamespace(name=name, device_type=device_type,
                           time_range=SimpleNamespace(start=start_us, end=end_us))


CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
# The launches of tests/unit/test_kernel_summary.cpp, and what the C++ writer makes of them.
EVENTS = [
    event("void fprop<int>(float)", 10.0, 11.0, CUDA),
    event('say "hi", twice', 20.0, 20.5, CUDA),
    event("void fprop<int>(float)", 30.0, 33.0, CUDA),
    event("Memcpy HtoD (Pageable -> Device)", 40.0, 90.0, CUDA),
    event("Memset (Device)", 91.0, 92.0, CUDA),
    event("aten::conv2d", 0.0, 100.0, CPU),
]
CPP_CSV = ('"Time (%)","Total Time (ns)","Instances","Avg (ns)","Min (ns)","Max (ns)","Name"\n'
           '88.9,4000,2,2000.0,1000,3000,"void fprop<int>(float)"\n'
           '11.1,500,1,500.0,500,500,"say ""hi"", twice"\n')

totals = pytorch_ddp.kernel_totals(EVENTS)
check("kernels summed by name; copies, fills and host operators left out",
      sorted(totals) == ['say "hi", twice', "void fprop<int>(float)"], repr(totals))
check("a name's total, launches, shortest and longest",
      totals["void fprop<int>(float)"] == [4000.0, 2, 1000.0, 3000.0], repr(totals))
csv_text = pytorch_ddp.kernel_summary_csv(totals)
check("the CSV is the one bench/kernel_summary.h writes for the same launches", csv_text == CPP_CSV,
      f"\n{csv_text}\nagainst\n{CPP_CSV}")

with tempfile.TemporaryDirectory() as work:
    path = os.path.join(work, "kernels.csv")
    with open(path, "w") as out:
        out.write(csv_text)
    kernels = {k.name: (k.total_ns, k.launches) for k in profile_breakdown.read_summary(path)}
    check("profile_breakdown.py reads it as an nsys kernel summary",
          kernels == {"void fprop<int>(float)": (4000.0, 2), 'say "hi", twice': (500.0, 1)},
          repr(kernels))

# A real trace: torch.profiler's events of CPU operators carry what the CUDA ones do.
weight = torch.randn(8, 3, 3, 3)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as traced:
    for _ in range(3):
        F.conv2d(torch.randn(2, 3, 16, 16), weight, padding=1)
real = pytorch_ddp.kernel_totals(traced.events(), device_type=CPU)
check("a real torch.profiler trace sums by name (aten::conv2d three times)",
      "aten::conv2d" in real and real["aten::conv2d"][1] == 3, repr(sorted(real)))
check("with positive durations, shortest <= longest",
      all(total > 0 and low <= high for total, _, low, high in real.values()), repr(real))
check("a CPU trace holds no CUDA kernel", pytorch_ddp.kernel_totals(traced.events()) == {})
print(numbered_checks.summary())
