"""The dashboard's browser login on a real `amid serve` of the demo run, opened in headless Chromium."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from tests.server.report.chromium import dump_dom
from tests.server.report.conftest import PLOT_IDS
from tests.server.report.dom import Node, parse


@dataclass(frozen=True)
class Served:
    workspace: Path
    base: str  # http://127.0.0.1:PORT
    agent_token: str


@pytest.fixture(scope="module")
def served(demo_copy: Path) -> Iterator[Served]:
    process, url = start_server(demo_copy)
    try:
        agent_token = admin_call(Workspace.open(demo_copy), "token_create", {"name": "agent-9", "role": "agent"})
        parts = urlsplit(url)
        yield Served(demo_copy, f"{parts.scheme}://{parts.netloc}", agent_token["token"])
    finally:
        stop_server(process)


def _amid_dashboard(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", "dashboard", "-w", str(served.workspace), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _login_link(served: Served, *args: str) -> str:
    result = _amid_dashboard(served, *args)
    assert result.returncode == 0, result.stderr
    links = [word for word in result.stdout.split() if word.startswith(f"{served.base}/dashboard/login?code=")]
    assert len(links) == 1, result.stdout
    return links[0]


def _browser(url: str, profile: Path) -> Node:
    return parse(dump_dom(url, profile))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _raw(url: str, *, cookie: str | None = None, method: str = "GET") -> tuple[int, Any, str]:
    """One request, redirects not followed, so the login's own answer and cookie can be read."""
    headers = {"Cookie": cookie} if cookie else {}
    request = urllib.request.Request(url, headers=headers, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=60) as response:
            return response.status, response.headers, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode("utf-8")


def test_the_login_link_opens_the_live_dashboard_in_chromium(served: Served, tmp_path: Path) -> None:
    link = _login_link(served, "--as", "alice")
    page = _browser(link, tmp_path / "profile")
    assert {p.attrs["id"] for p in page.by_class("plot")} == PLOT_IDS  # the live page, not a refusal
    assert page.by_id("generated").text.endswith("reloads every 15 s")
    assert page.by_id("session").text.startswith("signed in as alice")
    assert [f.attrs["action"] for f in page.by_tag("form")] == ["/dashboard/logout"]
    html = dump_dom(f"{served.base}/dashboard", tmp_path / "profile")  # the cookie carries the next visit
    assert 'id="session"' in html and urlsplit(link).query.split("=", 1)[1] not in html and "amid_" not in html


def test_a_reused_login_link_does_not_open_the_dashboard(served: Served, tmp_path: Path) -> None:
    link = _login_link(served, "--as", "alice")
    assert _browser(link, tmp_path / "first").by_id("session")
    second = _browser(link, tmp_path / "second")  # another browser, the same link: consumed
    assert "used already" in second.by_id("refused").text and not second.by_class("plot")


def test_an_expired_login_link_does_not_open_the_dashboard(served: Served, tmp_path: Path) -> None:
    link = _login_link(served, "--as", "alice", "--valid-s", "0.001")  # expired before the browser starts
    page = _browser(link, tmp_path / "profile")
    assert "expired" in page.by_id("refused").text and not page.by_class("plot")


def test_an_agent_cannot_log_in_to_the_dashboard(served: Served, tmp_path: Path) -> None:
    refused = _amid_dashboard(served, "--as", "agent-9")
    assert refused.returncode == 2 and "FORBIDDEN" not in refused.stdout
    assert "as: got 'agent-9' with role agent; expected a human" in refused.stderr
    crafted = _browser(f"{served.base}/dashboard/login?code={served.agent_token}", tmp_path / "profile")
    assert crafted.by_id("refused") and not crafted.by_class("plot")  # an agent token is no login code
    assert _raw(f"{served.base}/dashboard", cookie=f"amid_dashboard={served.agent_token}")[0] == 401


def test_the_session_cookie_is_httponly_strict_scoped_and_ends_at_logout(served: Served) -> None:
    status, headers, _ = _raw(_login_link(served, "--as", "bob"))
    cookie = headers["Set-Cookie"]
    assert status == 303 and headers["Location"] == "/dashboard"
    flags = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert {"httponly", "samesite", "path", "max-age"} <= set(flags)
    assert flags["samesite"].lower() == "samesite=strict" and flags["path"] == "Path=/dashboard"
    assert 0 < int(flags["max-age"].split("=")[1]) <= 86_400
    session = cookie.split(";")[0]
    assert _raw(f"{served.base}/dashboard", cookie=session)[0] == 200
    status, headers, _ = _raw(f"{served.base}/dashboard/logout", cookie=session, method="POST")
    assert status == 200 and 'amid_dashboard=""' in headers["Set-Cookie"]
    assert _raw(f"{served.base}/dashboard", cookie=session)[0] == 401  # the old cookie is dead on the server too


def test_revoking_the_humans_token_ends_their_browser_session(served: Served) -> None:
    session = _raw(_login_link(served, "--as", "carol"))[1]["Set-Cookie"].split(";")[0]
    assert _raw(f"{served.base}/dashboard", cookie=session)[0] == 200
    admin_call(Workspace.open(served.workspace), "token_revoke", {"name": "carol"})
    assert _raw(f"{served.base}/dashboard", cookie=session)[0] == 401
    refused = _amid_dashboard(served, "--as", "carol")
    assert refused.returncode == 2 and "tokens are all revoked" in refused.stderr


def test_login_codes_and_tokens_never_reach_the_server_log(served: Served) -> None:
    link = _login_link(served, "--as", "dave")
    _raw(link)
    log = (served.workspace / ".amid" / "serve.log").read_text(encoding="utf-8")
    assert urlsplit(link).query.split("=", 1)[1] not in log and served.agent_token not in log
    events = admin_call(Workspace.open(served.workspace), "sql", {"query": "SELECT payload FROM events"})["rows"]
    assert not [row for row in events if "code=" in str(row) or served.agent_token in str(row)]


def test_amid_dashboard_serves_an_unserved_workspace_and_its_link_opens_the_page(
    demo_copy: Path, tmp_path: Path
) -> None:
    root = tmp_path / "run"
    shutil.copytree(demo_copy.parent, root, symlinks=True)  # its own copy: the module's server holds demo_copy
    # the copy carries that server's marker, live (its process runs), which would send the command there
    (root / "workspace" / ".amid" / "server.json").unlink(missing_ok=True)
    command = [sys.executable, "-m", "amid", "dashboard", "-w", str(root / "workspace"), "--port", "0"]
    agent = subprocess.run([*command, "--as", "worker-1"], capture_output=True, text=True, timeout=120)
    assert agent.returncode == 2 and "as: got 'worker-1' with role agent" in agent.stderr  # refused before serving
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        link = _first_link(process)
        page = _browser(link, tmp_path / "profile")
        assert page.by_id("session").text.startswith("signed in as human")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        assert process.stdout is not None
        process.stdout.close()
    assert process.returncode == 0  # Ctrl-C is a clean stop
    assert not (root / "workspace" / ".amid" / "server.json").exists()


def _first_link(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for line in process.stdout:  # blocks per line; the command prints the link once the server listens
        if "/dashboard/login?code=" in line:
            return line.strip()
    raise AssertionError(f"amid dashboard printed no link (exit {process.wait()})")
