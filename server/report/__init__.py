"""What humans see of a run: `amid report` (one self-contained HTML page) and the live dashboard.

`build_report` reads the ledger through its read-only path, the task contract and the final
package's manifest, and renders a page with inline CSS and SVG only: no script, font or network.
"""

from __future__ import annotations

from server.report.build import build_report, report_facts

__all__ = ["build_report", "report_facts"]
