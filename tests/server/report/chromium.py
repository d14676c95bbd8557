"""Headless Chromium (Debian `chromium`): the page's DOM after rendering, and a screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

WINDOW = (1400, 2600)


def chromium() -> str:
    """The browser's executable; the test is skipped with the reason when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; .ci/setup installs it)")
    return found


def _run(page: Path | str, profile: Path, *flags: str) -> str:
    """Chromium on a file, or on a URL (a str: http://…, cookies kept in `profile` for the run)."""
    target = page if isinstance(page, str) else page.resolve().as_uri()
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *flags,
        target,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def dump_dom(page: Path | str, profile: Path) -> str:
    """The DOM Chromium built from the page (what a browser shows, serialised)."""
    return _run(page, profile, "--dump-dom")


def screenshot(page: Path | str, out: Path, profile: Path) -> Path:
    _run(page, profile, f"--screenshot={out}", f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars")
    return out
