"""The report's managed-workers table: each worker with the sandbox of its last start, as recorded."""

from __future__ import annotations

from amid.server.context import Services
from amid.server.report.build import build_report
from tests.server.report.dom import parse


def test_the_report_lists_each_managed_worker_with_the_sandbox_of_its_last_start(services: Services) -> None:
    workers = services.ledger.workers
    workers.transition("w-1", "codex", "running", "started", None, {"sandbox": "bwrap"}, "boss")
    workers.transition("w-1", "codex", "running", "session", "s-1", {"session_id": "s-1"}, "boss")
    workers.transition("w-2", "scripted", "running", "started", None, {"sandbox": "bwrap"}, "boss")
    workers.transition("w-2", "scripted", "running", "restarted", "s-2", {"sandbox": "none"}, "boss")
    table = parse(build_report(services.ledger, services.workspace)).by_id("table-workers")
    assert table.attrs["data-n"] == "2"
    kinds = [cell.attrs["data-sandbox"] for cell in table.by_class("sandbox")]
    assert kinds == ["bwrap", "none"]  # w-2's last start ran unconfined; the report says so
    assert "s-1" in table.text and "codex" in table.text


def test_a_run_without_managed_workers_says_so(services: Services) -> None:
    table = parse(build_report(services.ledger, services.workspace)).by_id("table-workers")
    assert table.by_class("no-data") and "no managed worker has started" in table.text
