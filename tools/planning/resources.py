"""What this machine offers a lane: installed Python packages and registry models' local availability.

Package versions come from the installed distributions' metadata (nothing heavy is imported);
model availability from the local Hugging Face hub cache (nothing is downloaded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from amid.registry.schemas import FoundationModel, Resource
from amid.tools.planning.fm_query import Availability, availability_of, cached_hub_files
from amid.tools.planning.portfolio import ResourceStatus

USABLE: frozenset[Availability] = frozenset({"cached", "obtainable"})
# Distributions of the project's `train` extra: `make demo` leaves them out, so name the extra to install.
TRAINING_STACK = frozenset({"torch", "monai", "nnunetv2"})
_AVAILABILITY_DETAIL: dict[str, str] = {
    "cached": "weights in the local hub cache",
    "obtainable": "open weights, downloadable",
    "gated": "gated: request access on the hub, then download",
    "unknown_offline": "on request or unknown offline",
}


@dataclass(frozen=True)
class Environment:
    """Installed packages (name -> version, None when absent) and hub-cached files per repo id."""

    packages: dict[str, str | None]
    hub_files: dict[str, frozenset[str]] = field(default_factory=dict)

    def version(self, package: str) -> str | None:
        return self.packages.get(package)


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """Installed version of each distribution, or None."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def detect_environment(package_names: Iterable[str], hub_cache_dir: Path | None = None) -> Environment:
    """The environment of this process: package metadata and the hub cache (None: the default cache)."""
    return Environment(packages=package_versions(sorted(set(package_names))), hub_files=cached_hub_files(hub_cache_dir))


def model_availability(model: FoundationModel, environment: Environment) -> Availability:
    return availability_of(model, environment.hub_files)


def resource_status(resource: Resource, models: Sequence[FoundationModel], environment: Environment) -> ResourceStatus:
    """Whether one template resource is usable here, and the detail a reader needs to act on it."""
    if resource.kind == "registry_model":
        model = next((m for m in models if m.id == resource.name), None)
        if model is None:
            available, detail = False, "not in the foundation-model registry"
        else:
            availability = model_availability(model, environment)
            available = availability in USABLE
            where = model.hub_id or model.repository
            detail = f"{availability}: {_AVAILABILITY_DETAIL[availability]} ({where})"
    else:
        version = environment.version(resource.name)
        available = version is not None
        detail = f"installed {version}" if version else f"not installed ({_install_hint(resource.name)})"
    return ResourceStatus(
        kind=resource.kind, name=resource.name, required=resource.required, available=available, detail=detail
    )


def _install_hint(package: str) -> str:
    if package in TRAINING_STACK:
        return "pip install 'amid[train]', the training stack: torch, MONAI, nnU-Net"
    return f"pip install {package}"
