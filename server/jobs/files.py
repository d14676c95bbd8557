"""The layout of one job folder and the small file helpers every writer of it shares.

    jobs/<job_id>/
      spec.json       the JobSpec, written once at submit                    (scheduler)
      state.json      the JobState, the durable truth                        (scheduler)
      stop.json       a stop request and its cause: cancelled | timed_out    (scheduler)
      launch.json     written just before the backend starts the job         (backend)
      wrapper.json    pid, start time and boot id of the local wrapper       (backend, wrapper)
      child.json      pid and process group of the job's command             (wrapper)
      exit.json       exit code, status, times, peak GPU memory              (wrapper)
      stdout.log, stderr.log, wrapper.log

Every JSON file is replaced atomically (write a temporary file, then os.replace), so a reader
sees the old or the new content, never half of it. This module is stdlib-only: the wrapper
imports it before recording its pid.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SPEC = "spec.json"
STATE = "state.json"
STOP = "stop.json"
LAUNCH = "launch.json"
WRAPPER = "wrapper.json"
CHILD = "child.json"
EXIT = "exit.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
WRAPPER_LOG = "wrapper.log"


def utc_now() -> str:
    """Timestamps are UTC ISO 8601 with microseconds, so they sort and cross hosts (docs/ARCHITECTURE.md §14)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def seconds_between(start_iso: str, end_iso: str) -> float:
    return (datetime.fromisoformat(end_iso) - datetime.fromisoformat(start_iso)).total_seconds()


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write to a sibling temporary file, flush it to disk, then rename over the target."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The parsed file, or None when it does not exist (yet)."""
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = json.load(handle)
    except FileNotFoundError:
        return None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return loaded


def read_tail(path: Path, n_bytes: int) -> tuple[str, int]:
    """The last `n_bytes` of a log as text (undecodable bytes replaced) and the file's full size."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - n_bytes))
            data = handle.read(n_bytes)
    except FileNotFoundError:
        return "", 0
    return data.decode("utf-8", errors="replace"), size
