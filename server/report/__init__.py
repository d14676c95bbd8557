"""What humans see of a run: `amid report` (one self-contained HTML page) and the live dashboard.

`build_report` reads the ledger through its read-only path, the task contract and the final
package's manifest, and renders a page with inline CSS and SVG only: no script, font or network.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_report", "report_facts"]


def __getattr__(name: str) -> Any:
    """`build_report` and `report_facts` load on first use: `amid --help` must not import DuckDB."""
    if name in __all__:
        from amid.server.report import build

        return getattr(build, name)
    raise AttributeError(name)
