"""The small process that runs one job: `python -m amid.server.jobs.wrapper JOB_DIR`.

It is started in its own session, so it outlives a server restart. It records its identity,
runs the command in a new process group with logs to files, stops the whole group on a stop
request or at the time limit (SIGTERM, bounded grace, SIGKILL), samples the group's peak GPU
memory, and writes exit.json atomically as its last act. A server that finds exit.json knows the
outcome; one that finds a dead wrapper and no exit.json knows the job was lost.

Only the standard library is imported up front: the identity must be on disk before anything
slow happens (the server gives a starting wrapper a few seconds to appear, then calls it lost).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amid.server.jobs import files
from amid.server.jobs.procs import group_members, identify, terminate_group

if TYPE_CHECKING:
    from amid.server.jobs.gpu import GpuInventory

_TICK_S = 0.1


def main(argv: list[str]) -> int:
    job_dir = Path(argv[0])
    stop = _stop_on_signals()
    record_identity(job_dir)
    spec = files.read_json(job_dir / files.SPEC) or {}
    launch = files.read_json(job_dir / files.LAUNCH) or {}
    started_at = files.utc_now()
    try:
        outcome = run_job(job_dir, spec, launch, stop)
    except Exception as exc:  # the outcome must be written whatever went wrong, and nothing left running
        child = files.read_json(job_dir / files.CHILD)
        if child is not None:
            terminate_group(int(child["pgid"]), float(launch.get("kill_grace_s", 10.0)))
        outcome = _outcome("failed", None, started_at, f"job wrapper error: {exc!r}")
    files.write_json_atomic(job_dir / files.EXIT, outcome)
    return 0


def record_identity(job_dir: Path) -> None:
    me = identify(os.getpid())
    assert me is not None
    files.write_json_atomic(job_dir / files.WRAPPER, {**me.to_json(), "host": socket.gethostname()})


def _stop_on_signals() -> threading.Event:
    """SIGTERM/SIGINT/SIGHUP to the wrapper mean "stop the job", never "vanish without a word"."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def child_env(job_id: str, job_dir: Path, spec: dict[str, Any], launch: dict[str, Any]) -> dict[str, str]:
    # A boxed job starts from the clean environment its launch names, never the server's own.
    base = launch.get("env", os.environ)
    env = {**base, **spec.get("env", {}), "AMID_JOB_ID": job_id, "AMID_JOB_DIR": str(job_dir)}
    if launch.get("pin_gpus", True):
        # Pin by UUID and make CUDA count devices in bus order, as NVML does.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(launch.get("gpu_uuids", []))
    return env


def run_job(job_dir: Path, spec: dict[str, Any], launch: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
    started_at = files.utc_now()
    if _stop_cause(job_dir, stop):
        return _outcome("cancelled", None, started_at, "cancelled before the command started")
    env = child_env(job_dir.name, job_dir, spec, launch)
    with open(job_dir / files.STDOUT, "ab") as out, open(job_dir / files.STDERR, "ab") as err:
        try:
            child = subprocess.Popen(
                launch.get("command") or spec["command"],
                cwd=spec["cwd"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return _outcome("failed", 127, started_at, f"could not start {spec['command'][0]!r}: {exc}")
    child_id = identify(child.pid)
    files.write_json_atomic(job_dir / files.CHILD, {**(child_id.to_json() if child_id else {}), "pgid": child.pid})
    return _supervise(job_dir, child, spec, launch, stop, started_at)


def _supervise(
    job_dir: Path,
    child: subprocess.Popen[bytes],
    spec: dict[str, Any],
    launch: dict[str, Any],
    stop: threading.Event,
    started_at: str,
) -> dict[str, Any]:
    grace_s = float(launch.get("kill_grace_s", 10.0))
    deadline = time.monotonic() + float(spec["time_limit_s"])
    sampler = PeakSampler.maybe(launch)
    cause = None
    while cause is None:
        try:
            child.wait(timeout=_TICK_S)
            break
        except subprocess.TimeoutExpired:
            pass
        if sampler:
            sampler.sample(child.pid)
        cause = _stop_cause(job_dir, stop) or ("timed_out" if time.monotonic() >= deadline else None)
    # The command's own exit does not end its background children; the group goes with it.
    killed = terminate_group(child.pid, grace_s) if cause or group_members(child.pid) else False
    exit_code = child.wait()
    outcome = _describe_end(cause, exit_code, killed, spec, grace_s, started_at)
    outcome.update(sampler.result() if sampler else {"peak_gpu_mem_mb": None})
    return outcome


def _stop_cause(job_dir: Path, stop: threading.Event) -> str | None:
    request = files.read_json(job_dir / files.STOP)
    if request is not None:
        return str(request.get("cause", "cancelled"))
    return "cancelled" if stop.is_set() else None


def _describe_end(
    cause: str | None, exit_code: int, killed: bool, spec: dict[str, Any], grace_s: float, started_at: str
) -> dict[str, Any]:
    stopped_by = f"SIGKILL after {grace_s:g} s grace" if killed else "SIGTERM"
    how = f"process group stopped ({stopped_by})"
    if cause == "timed_out":
        return _outcome("timed_out", exit_code, started_at, f"time limit of {spec['time_limit_s']} s reached; {how}")
    if cause is not None:
        return _outcome("cancelled", exit_code, started_at, f"stopped on request; {how}")
    if exit_code == 0:
        return _outcome("succeeded", 0, started_at, None)
    if exit_code < 0:
        return _outcome("failed", exit_code, started_at, f"killed by {_signal_name(-exit_code)}")
    return _outcome("failed", exit_code, started_at, f"exited with code {exit_code}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # real-time signals have no name
        return f"signal {number}"


def _outcome(status: str, exit_code: int | None, started_at: str, reason: str | None) -> dict[str, Any]:
    ended_at = files.utc_now()
    return {
        "status": status,
        "exit_code": exit_code,
        "started_at": started_at,
        "ended_at": ended_at,
        "wall_s": round(files.seconds_between(started_at, ended_at), 3),
        "reason": reason,
    }


class PeakSampler:
    """Peak GPU memory of the job's process group, from NVML, sampled every `interval_s`.

    NVML attributes memory to host pids; inside a container without the host pid namespace the
    group's pids never match, so the growth of used memory on the pinned devices is the fallback.
    """

    def __init__(self, inventory: GpuInventory, uuids: list[str], interval_s: float) -> None:
        self._inventory = inventory
        self._uuids = set(uuids)
        self._interval_s = interval_s
        self._next = 0.0
        self._baseline = self._device_used_mb()
        self._peak_process = 0
        self._peak_device = 0

    @classmethod
    def maybe(cls, launch: dict[str, Any]) -> PeakSampler | None:
        """A sampler on NVML for a GPU job where NVML works; else None (nothing to measure)."""
        uuids = launch.get("gpu_uuids") or []
        if not uuids:
            return None
        from amid.server.jobs.gpu import NvmlInventory  # pydantic and NVML only for GPU jobs

        inventory = NvmlInventory()
        if inventory.unavailable_reason is not None:
            return None
        return cls(inventory, uuids, float(launch.get("sample_interval_s", 0.5)))

    def _device_used_mb(self) -> int:
        return sum(g.memory_used_mb for g in self._inventory.gpus() if g.uuid in self._uuids)

    def sample(self, pgid: int) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._interval_s
        gpus, pids = self._inventory.gpus(), set(group_members(pgid))
        by_group = sum(p.used_mb for g in gpus for p in g.processes if p.pid in pids)
        on_devices = sum(g.memory_used_mb for g in gpus if g.uuid in self._uuids) - self._baseline
        self._peak_process = max(self._peak_process, by_group)
        self._peak_device = max(self._peak_device, on_devices)

    def result(self) -> dict[str, Any]:
        if self._peak_process > 0:
            return {"peak_gpu_mem_mb": self._peak_process, "peak_gpu_mem_source": "processes"}
        return {"peak_gpu_mem_mb": max(self._peak_device, 0), "peak_gpu_mem_source": "device_delta"}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
