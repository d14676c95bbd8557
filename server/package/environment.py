"""The environment a package was built in: Python, the key packages' versions, the GPU."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

KEY_PACKAGES = ("torch", "monai", "nnunetv2", "numpy", "nibabel", "SimpleITK", "duckdb", "mcp", "amid")


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in KEY_PACKAGES},
        "gpu": gpu_names() or "none",
    }


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def gpu_names() -> list[str]:
    """The NVML names of this machine's GPUs (empty without a driver or bindings)."""
    from amid.server.jobs.gpu import NvmlInventory

    return [gpu.name for gpu in NvmlInventory().gpus()]
