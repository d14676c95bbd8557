"""`amid supervise` options that need no running server: managed workers are refused without a workspace."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from amid.server.cli import main


def test_managed_workers_without_a_workspace_are_refused_naming_the_option() -> None:
    result = CliRunner().invoke(
        main, ["supervise", "--server", "http://127.0.0.1:9/mcp", "--token", "t", "--workers", "2"]
    )
    assert result.exit_code != 0
    assert "--workers" in result.output and "-w DIR" in result.output
    assert "Traceback" not in result.output


def test_every_worker_setting_a_user_needs_has_a_supervise_flag_documented_in_the_readme() -> None:
    from pathlib import Path

    from amid.server.supervisor.cli import WORKER_FLAGS
    from amid.server.supervisor.workers.settings import WorkerSettings

    shown = CliRunner().invoke(main, ["supervise", "--help"], terminal_width=200).output
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    for name in WORKER_FLAGS:
        flag = f"--{name.replace('_', '-')}"
        assert flag in shown and f"`{flag}" in readme, flag
        assert name in WorkerSettings.model_fields or name == "model_api_key_env", name


def test_a_model_key_variable_that_is_not_set_is_refused_naming_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
    result = CliRunner().invoke(
        main,
        [
            "supervise",
            "--server",
            "http://127.0.0.1:9/mcp",
            "--token",
            "t",
            "--workers",
            "1",
            "-w",
            "/nonexistent",
            "--model-base-url",
            "http://127.0.0.1:9/v1",
            "--model-api-key-env",
            "NO_SUCH_KEY_VARIABLE",
        ],
    )
    assert result.exit_code == 2
    assert "--model-api-key-env: NO_SUCH_KEY_VARIABLE is not set in this environment" in result.output
