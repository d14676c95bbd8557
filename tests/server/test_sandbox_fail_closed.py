"""resolve_kind fails closed: without a working bubblewrap, `bwrap` and `auto` alike raise an error that
names the setting and the fix; only an explicit `none` runs unconfined."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server import sandbox
from amid.server.errors import Conflict


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap on PATH
    sandbox.bwrap_problem.cache_clear()
    yield
    sandbox.bwrap_problem.cache_clear()  # the next test sees the real PATH again


@pytest.mark.parametrize("setting", ["bwrap", "auto"])
def test_a_required_sandbox_without_bubblewrap_raises_naming_the_setting_and_the_fix(
    no_bwrap: None, setting: str
) -> None:
    with pytest.raises(sandbox.SandboxUnavailable) as raised:
        sandbox.resolve_kind(setting)  # type: ignore[arg-type]
    message = raised.value.message
    assert message.startswith(f"replay_sandbox={setting} needs a working sandbox, but bwrap is not installed")
    assert message.endswith(
        "install bubblewrap: apt-get install bubblewrap, or pass --replay-sandbox none to run unconfined"
    )
    assert isinstance(raised.value, Conflict) and raised.value.field == "replay_sandbox"


def test_a_worker_sandbox_names_its_own_flag(no_bwrap: None) -> None:
    with pytest.raises(
        sandbox.SandboxUnavailable, match=r"^sandbox=bwrap .* or pass --sandbox none to run unconfined$"
    ):
        sandbox.resolve_kind("bwrap", sandbox.WORKER)


def test_only_an_explicit_none_runs_unconfined(no_bwrap: None) -> None:
    assert sandbox.resolve_kind("none") == "none"
    assert sandbox.resolve_kind("none", sandbox.WORKER) == "none"
