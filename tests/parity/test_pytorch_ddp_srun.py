"""bench/pytorch_ddp.py --srun, as the Slurm benchmark jobs start it: each task's rank, world size
and local rank come from Slurm's variables and the rendezvous from the job script's MASTER_ADDR
and MASTER_PORT; a task started without them stops with a message naming what is missing. The
measurement itself needs a GPU (the slurm test slurm.benchmark_scaling runs the script under
srun, where it says it has none)."""
import os
import subprocess
import sys

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
sys.path.insert(0, os.path.dirname(__file__))
import numbered_checks  # noqa: E402
import pytorch_ddp  # noqa: E402
from numbered_checks import check  # noqa: E402

TASK = {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
        "MASTER_ADDR": "node01", "MASTER_PORT": "20042"}


def refusal(environ):
    """The message of the SystemExit that srun_rendezvous raises, or None."""
    try:
        pytorch_ddp.srun_rendezvous(environ)
    except SystemExit as stop:
        return str(stop.code)
    return None


check("task 5 of 16, local rank 1, meets rank 0 at MASTER_ADDR:MASTER_PORT",
      pytorch_ddp.srun_rendezvous(TASK) == (5, 16, 1, "tcp://node01:20042"))
check("--srun is a flag of the command line", pytorch_ddp.parse_args(["--srun"]).srun)
missing = refusal({k: v for k, v in TASK.items() if k not in ("MASTER_ADDR", "MASTER_PORT")})
check("without MASTER_ADDR and MASTER_PORT it names them and where they come from",
      missing is not None and missing.startswith("pytorch_ddp.py --srun: MASTER_ADDR, MASTER_PORT "
                                                  "not set") and "benchmark_runs.sh" in missing,
      str(missing))
check("a rank outside the step is refused",
      "rank 16 of 16 tasks" in (refusal(dict(TASK, SLURM_PROCID="16")) or ""))
check("a port that is no number is refused",
      "must be whole numbers" in (refusal(dict(TASK, MASTER_PORT="any")) or ""))

# The script as srun starts it, outside a job: it stops before touching a GPU, exit status 1.
environ = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k != "MASTER_ADDR"}
script = os.path.join(SOURCE_DIR, "bench", "pytorch_ddp.py")
run = subprocess.run([sys.executable, script, "--srun", "--batch", "2"], env=environ,
                     capture_output=True, text=True, timeout=300)
if "SKIPPED" in run.stdout:
    check("without a GPU the script says SKIPPED before it looks for its tasks", run.returncode == 0)
else:
    check("outside a job, --srun stops with the message and exit status 1",
          run.returncode == 1 and "SLURM_PROCID" in run.stderr, run.stderr[-500:])
print(numbered_checks.summary())
