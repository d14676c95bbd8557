"""`amid supervise`: the supervisor process, an MCP client of the running server.

With `-w DIR` it finds the server from the workspace's marker and issues itself a supervisor token
through the admin route; with `--server URL --token T` it needs nothing but the network. It keeps
nothing on disk: killed and started again, it rebuilds its view from the server and continues.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from server.errors import Conflict, InvalidInput

if TYPE_CHECKING:
    from server.supervisor.loop import TickReport, Workers

SUPERVISOR_NAME = "supervisor"


def resolve_server(workspace: Path | None, server: str | None, token: str | None) -> tuple[str, str]:
    """The MCP URL and a supervisor token, from --server/--token or from the workspace's server."""
    if server and token:
        return server, token
    if workspace is None:
        raise InvalidInput("give -w DIR (a workspace with a running server) or both --server URL and --token T")
    from server.local_client import call as admin_call
    from server.workspace import Workspace, read_server_marker

    ws = Workspace.open(workspace)
    marker = read_server_marker(ws)
    if not marker:
        raise Conflict(f"no server runs on {ws.root}; start `amid serve -w {ws.root}` first")
    issued = admin_call(ws, "token_create", {"name": SUPERVISOR_NAME, "role": "supervisor"})
    return server or str(marker["url"]), token or str(issued["token"])


def _echo(report: TickReport) -> None:
    for line in [*report.stage_changes, *report.lane_changes, *(f"role {r}" for r in report.role_changes)]:
        click.echo(f"[{report.stage}] {line}")
    for beat in report.heartbeats:
        click.echo(f"[{report.stage}] heartbeat {beat}")
    if report.final_attempt_id:
        click.echo(f"[{report.stage}] final attempt {report.final_attempt_id}")
    if report.waiting:
        click.echo(f"[{report.stage}] waiting: {report.waiting}")


async def supervise(
    url: str, token: str, *, poll_s: float, until_done: bool, max_s: float | None, workers: Workers | None = None
) -> TickReport:
    """Run the supervisor against the server at `url` until the run is done (or max_s passes)."""
    from server.mcp_client import call, connect
    from server.supervisor.loop import Supervisor

    async with connect(url, token) as client:

        async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return await call(client, name, arguments)

        if workers is not None:
            workers.start()
        try:
            return await Supervisor(tool, workers).run(poll_s, until_done, max_s, on_tick=_echo)
        finally:
            if workers is not None:
                workers.stop()


@click.command("supervise")
@click.option("--workspace", "-w", type=click.Path(path_type=Path), default=None, help="workspace of a running server")
@click.option("--server", default=None, help="MCP URL of the server (with --token)")
@click.option("--token", default=None, envvar="AMID_SUPERVISOR_TOKEN", help="a supervisor token (or env)")
@click.option("--poll-s", default=5.0, show_default=True, help="seconds between ticks")
@click.option("--until-done/--forever", default=True, show_default=True, help="stop when the run is done")
@click.option("--max-s", default=None, type=float, help="stop after this many seconds")
@click.option("--workers", "n_workers", default=0, show_default=True, help="managed workers to start (needs -w)")
@click.option(
    "--backend", default="scripted", show_default=True, help="worker backend: registry/worker_backends/*.yaml"
)
@click.option(
    "--worker-env", multiple=True, metavar="KEY=VALUE",
    help="environment for the managed workers' CLIs (model endpoint, API key; AMID_SCRIPTED_CHEAT=worker-3 …)",
)  # fmt: skip
def supervise_command(
    workspace: Path | None, server: str | None, token: str | None, poll_s: float, until_done: bool,
    max_s: float | None, n_workers: int, backend: str, worker_env: tuple[str, ...],
) -> None:  # fmt: skip
    """Supervise a run: stages, promotion, heartbeats, finalization (DESIGN §9); with --workers N,
    start and manage N headless workers of a backend (claude-code, codex, opencode, scripted …)."""
    env = _worker_env(worker_env)
    url, secret = resolve_server(workspace, server, token)
    pool = _pool(workspace, url, backend, n_workers, secret, env) if n_workers else None
    report = asyncio.run(supervise(url, secret, poll_s=poll_s, until_done=until_done, max_s=max_s, workers=pool))
    click.echo(f"supervisor stopped in stage {report.stage}")


def _worker_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.replace("_", "").isalnum() or key[0].isdigit():
            raise InvalidInput(f"--worker-env: got {pair[:80]!r}; expected KEY=VALUE with KEY like AMID_SCRIPTED_CHEAT")
        env[key] = value
    return env


def _pool(workspace: Path | None, url: str, backend: str, n: int, token: str, env: dict[str, str]) -> Workers:
    """Managed workers need the workspace (worktrees, tokens through the admin route)."""
    if workspace is None:
        raise InvalidInput("--workers: managed workers need -w DIR (their worktrees live in the workspace)")
    from registry.loader import worker_backend
    from server.supervisor.workers.pool import WorkerPool
    from server.supervisor.workers.settings import WorkerSettings
    from server.workspace import Workspace

    worker_backend(backend)  # an unknown backend fails here, naming the backends there are
    settings = WorkerSettings(model_env=env)
    return WorkerPool(Workspace.open(workspace), url, backend, n, settings=settings, supervisor_token=token)
