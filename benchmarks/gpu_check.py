"""GPU check: run a real CUDA job (a torch matmul) through the local job scheduler.

Prints the NVML inventory, the UUID the job was pinned to (and the UUID CUDA showed the job),
the job's exit status and the peak GPU memory the wrapper recorded. On a machine without a GPU it
says so and exits 0.

    python benchmarks/gpu_check.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from amid.server.jobs.gpu import GpuInfo, NvmlInventory
from amid.server.jobs.local import LocalBackend
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.spec import JobSpec, JobState

# The job: 8192² float32 matmuls (~0.8 GiB held), then a pause so the sampler sees the peak.
CUDA_JOB = """
import os, time, torch
assert torch.cuda.is_available(), "CUDA is not available to the job"
props = torch.cuda.get_device_properties(0)
print("job sees", torch.cuda.device_count(), "device(s):", props.name, "uuid GPU-%s" % props.uuid)
print("CUDA_VISIBLE_DEVICES=" + os.environ["CUDA_VISIBLE_DEVICES"])
x = torch.randn(8192, 8192, device="cuda")
for _ in range(20):
    y = x @ x
torch.cuda.synchronize()
print("checksum", float(y.abs().sum()))
print("torch max_memory_allocated_mb", torch.cuda.max_memory_allocated() // 2**20)
time.sleep(2.0)
"""


def print_inventory(gpus: list[GpuInfo]) -> None:
    print(f"NVML inventory: {len(gpus)} GPU(s)")
    for g in gpus:
        print(
            f"  GPU{g.index} {g.uuid} {g.name}: {g.memory_free_mb}/{g.memory_total_mb} MiB free, "
            f"{g.utilization_pct}% busy, {len(g.processes)} process(es)"
        )


def run_cuda_job(inventory: NvmlInventory, workdir: Path) -> JobState:
    backend = LocalBackend(python=sys.executable, base_env=os.environ, sample_interval_s=0.2)
    scheduler = JobScheduler(workdir / "jobs", backend, inventory, max_concurrent=1)
    try:
        spec = JobSpec(command=[sys.executable, "-c", CUDA_JOB], cwd=str(workdir), gpus=1, time_limit_s=600)
        submitted = scheduler.submit("gpu-check", spec)
        return scheduler.wait(submitted.job_id, timeout_s=600)
    finally:
        scheduler.close()


def report(state: JobState, workdir: Path) -> None:
    job_dir = workdir / "jobs" / state.job_id
    outcome = (
        json.loads((job_dir / "exit.json").read_text(encoding="utf-8")) if (job_dir / "exit.json").exists() else {}
    )
    print(f"pinned GPU UUID(s): {', '.join(state.gpu_uuids) or '-'}")
    print(f"job status: {state.status} (exit code {state.exit_code}, wall {state.wall_s} s)")
    if state.reason:
        print(f"reason: {state.reason}")
    print(f"peak GPU memory recorded: {state.peak_gpu_mem_mb} MiB (source: {outcome.get('peak_gpu_mem_source')})")
    print("job stdout:\n  " + (job_dir / "stdout.log").read_text(encoding="utf-8").strip().replace("\n", "\n  "))
    stderr = (job_dir / "stderr.log").read_text(encoding="utf-8").strip()
    if stderr:
        print("job stderr (tail):\n  " + stderr[-2000:].replace("\n", "\n  "))


def main() -> int:
    inventory = NvmlInventory()
    gpus = inventory.gpus()
    if not gpus:
        print(f"gpu_check: no GPU on this machine ({inventory.unavailable_reason}); nothing to check.")
        return 0
    print_inventory(gpus)
    with tempfile.TemporaryDirectory(prefix="amid-gpu-check-") as tmp:
        state = run_cuda_job(inventory, Path(tmp))
        report(state, Path(tmp))
    ok = state.status == "succeeded" and bool(state.peak_gpu_mem_mb)
    print("gpu_check: OK" if ok else "gpu_check: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
