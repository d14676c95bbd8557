"""Profiling: an evidence-backed profile of a medical-imaging task's data (plain Python, no MCP).

Entry points: `profile_dataset(request)` -> `DataProfile`; `DataProfile.compact()` for a tool reply;
`write_report(profile, folder)`; `fingerprint(request)` as the cache key.

Exports load lazily: worker processes import `amid.tools.profiling.casework`, which runs this file, and
should not pay for the report and section modules they never use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amid.tools.profiling.dataprofile import CompactProfile, DataProfile
    from amid.tools.profiling.inputs import LabelsTable, ProfileCase, ProfileRequest
    from amid.tools.profiling.models import CaseRecord, ChannelStats, Predicate, ProfileIssue, Stats
    from amid.tools.profiling.profile import fingerprint, profile_dataset
    from amid.tools.profiling.readers import ImageHeader, read_array, read_header
    from amid.tools.profiling.report import write_report

_EXPORTS = {
    "CaseRecord": "models",
    "ChannelStats": "models",
    "CompactProfile": "dataprofile",
    "DataProfile": "dataprofile",
    "ImageHeader": "readers",
    "LabelsTable": "inputs",
    "Predicate": "models",
    "ProfileCase": "inputs",
    "ProfileIssue": "models",
    "ProfileRequest": "inputs",
    "Stats": "models",
    "fingerprint": "profile",
    "profile_dataset": "profile",
    "read_array": "readers",
    "read_header": "readers",
    "write_report": "report",
}
__all__ = [
    "CaseRecord",
    "ChannelStats",
    "CompactProfile",
    "DataProfile",
    "ImageHeader",
    "LabelsTable",
    "Predicate",
    "ProfileCase",
    "ProfileIssue",
    "ProfileRequest",
    "Stats",
    "fingerprint",
    "profile_dataset",
    "read_array",
    "read_header",
    "write_report",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'amid.tools.profiling' has no attribute {name!r}")
    return getattr(importlib.import_module(f"amid.tools.profiling.{_EXPORTS[name]}"), name)
