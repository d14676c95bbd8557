"""`amid supervise` options that need no running server: managed workers are refused without a workspace."""

from __future__ import annotations

from click.testing import CliRunner

from server.cli import main


def test_managed_workers_without_a_workspace_are_refused_naming_the_option() -> None:
    result = CliRunner().invoke(
        main, ["supervise", "--server", "http://127.0.0.1:9/mcp", "--token", "t", "--workers", "2"]
    )
    assert result.exit_code != 0
    assert "--workers" in result.output and "-w DIR" in result.output
    assert "Traceback" not in result.output
