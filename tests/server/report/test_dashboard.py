"""GET /dashboard on a real `amid serve` of the demo run: human tokens only, the report live."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from tests.server.report.checks import check_numbers_match, check_plots_drawn
from tests.server.report.chromium import dump_dom
from tests.server.report.conftest import LedgerNumbers, numbers_from_file
from tests.server.report.dom import parse


@dataclass(frozen=True)
class Served:
    workspace: Path
    dashboard_url: str
    tokens: dict[str, str]
    numbers: LedgerNumbers  # read from the file before the server took it


@pytest.fixture(scope="module")
def served(demo_copy: Path) -> Iterator[Served]:
    numbers = numbers_from_file(demo_copy / "amid.duckdb")
    process, url = start_server(demo_copy)
    try:
        workspace = Workspace.open(demo_copy)
        tokens = {
            role: admin_call(workspace, "token_create", {"name": f"{role}-1", "role": role})["token"]
            for role in ("human", "agent", "supervisor")
        }
        parts = urlsplit(url)
        yield Served(demo_copy, f"{parts.scheme}://{parts.netloc}/dashboard", tokens, numbers)
    finally:
        stop_server(process)


def _get(url: str, token: str | None) -> tuple[int, Message, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return response.status, response.headers, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode("utf-8")


def test_dashboard_refuses_requests_without_a_human_token(served: Served) -> None:
    status, headers, body = _get(served.dashboard_url, None)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer") and "human token" in body
    assert _get(served.dashboard_url, "amid_not-a-token")[0] == 401
    for role in ("agent", "supervisor"):
        status, _, body = _get(served.dashboard_url, served.tokens[role])
        assert status == 403 and f"role {role}" in body


def test_dashboard_serves_the_report_live_to_a_human(served: Served, tmp_path: Path) -> None:
    status, headers, html = _get(served.dashboard_url, served.tokens["human"])
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page_file = tmp_path / "dashboard.html"
    page_file.write_text(html, encoding="utf-8")
    page = parse(dump_dom(page_file, tmp_path / "profile"))
    refresh = [m for m in page.by_tag("meta") if m.attrs.get("http-equiv") == "refresh"]
    assert refresh and int(refresh[0].attrs["content"]) > 0
    check_plots_drawn(page)
    check_numbers_match(page, served.numbers)


def test_amid_report_goes_through_the_running_server(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "amid", "report", "-w", str(served.workspace), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr  # the server holds the ledger: only its admin route can read it
    page = parse(out.read_text(encoding="utf-8"))
    assert not [m for m in page.by_tag("meta") if m.attrs.get("http-equiv") == "refresh"]  # a file does not reload
    check_plots_drawn(page)
    check_numbers_match(page, served.numbers)
