"""GPU inventory: what devices exist, how full and how busy they are, and who uses them.

`NvmlInventory` asks the driver through NVML (the `pynvml` module of nvidia-ml-py, imported only
when first needed). On a machine without a driver it reports no GPUs and says why in
`unavailable_reason`, so callers can explain a refusal instead of crashing. `StaticInventory`
serves a fixed list: NVML is the one edge tests may fake, since CI machines have no GPU.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

_MIB = 1024 * 1024


class GpuProcess(NamedTuple):
    pid: int
    used_mb: int


class GpuInfo(BaseModel):
    """One device as NVML reports it; memory in MiB, utilisation in percent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    uuid: str
    name: str
    memory_total_mb: int
    memory_free_mb: int
    utilization_pct: int
    processes: list[GpuProcess] = Field(default_factory=list)

    @property
    def memory_used_mb(self) -> int:
        return self.memory_total_mb - self.memory_free_mb


class GpuInventory(Protocol):
    @property
    def unavailable_reason(self) -> str | None:
        """Why there are no GPUs to offer, or None when the inventory works."""
        ...

    def gpus(self) -> list[GpuInfo]: ...

    def process_memory_mb(self, pids: Collection[int]) -> int:
        """GPU memory, summed over all devices, used by the given processes."""
        ...


class StaticInventory:
    """A fixed inventory (for tests and for machines where devices are declared, not probed)."""

    def __init__(self, gpus: Sequence[GpuInfo], unavailable_reason: str | None = None) -> None:
        self._gpus = list(gpus)
        self._reason = unavailable_reason if gpus or unavailable_reason else "no GPUs were declared"

    @property
    def unavailable_reason(self) -> str | None:
        return None if self._gpus else self._reason

    def gpus(self) -> list[GpuInfo]:
        return list(self._gpus)

    def process_memory_mb(self, pids: Collection[int]) -> int:
        wanted = set(pids)
        return sum(p.used_mb for gpu in self._gpus for p in gpu.processes if p.pid in wanted)


class NvmlInventory:
    """The real inventory, read from NVML on every call (memory and load change all the time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nvml: Any = None
        self._reason: str | None = None
        self._tried = False

    @property
    def unavailable_reason(self) -> str | None:
        self._ensure_initialised()
        return self._reason

    def gpus(self) -> list[GpuInfo]:
        nvml = self._ensure_initialised()
        if nvml is None:
            return []
        with self._lock:
            return [_read_device(nvml, index) for index in range(nvml.nvmlDeviceGetCount())]

    def process_memory_mb(self, pids: Collection[int]) -> int:
        wanted = set(pids)
        return sum(p.used_mb for gpu in self.gpus() for p in gpu.processes if p.pid in wanted)

    def _ensure_initialised(self) -> Any:
        with self._lock:
            if not self._tried:
                self._tried = True
                self._nvml, self._reason = _init_nvml()
            return self._nvml


def _init_nvml() -> tuple[Any, str | None]:
    try:
        import pynvml
    except ImportError as exc:
        return None, f"NVML bindings are not installed (pip install nvidia-ml-py): {exc}"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, f"NVML is unavailable on this machine (no NVIDIA driver?): {exc}"
    return pynvml, None


def _read_device(nvml: Any, index: int) -> GpuInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    return GpuInfo(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=_text(nvml.nvmlDeviceGetName(handle)),
        memory_total_mb=int(memory.total // _MIB),
        memory_free_mb=int(memory.free // _MIB),
        utilization_pct=_utilization(nvml, handle),
        processes=_processes(nvml, handle),
    )


def _utilization(nvml: Any, handle: Any) -> int:
    try:
        return int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except nvml.NVMLError:
        return 0  # not supported on some devices (MIG slices); treat as idle rather than fail


def _processes(nvml: Any, handle: Any) -> list[GpuProcess]:
    try:
        running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except nvml.NVMLError:
        return []
    # usedGpuMemory is None where the driver cannot attribute memory (e.g. under some containers).
    return [GpuProcess(int(p.pid), int((p.usedGpuMemory or 0) // _MIB)) for p in running]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
