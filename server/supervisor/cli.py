"""`amid supervise`: the supervisor process, an MCP client of the running server.

With `-w DIR` it finds the server from the workspace's marker and issues itself a supervisor token
through the admin route; with `--server URL --token T` it needs nothing but the network. It keeps
nothing on disk: killed and started again, it rebuilds its view from the server and continues.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from amid.server.errors import Conflict, InvalidInput

if TYPE_CHECKING:
    from amid.server.supervisor.loop import TickReport, Workers

SUPERVISOR_NAME = "supervisor"


def resolve_server(workspace: Path | None, server: str | None, token: str | None) -> tuple[str, str]:
    """The MCP URL and a supervisor token, from --server/--token or from the workspace's server."""
    if server and token:
        return server, token
    if workspace is None:
        raise InvalidInput("give -w DIR (a workspace with a running server) or both --server URL and --token T")
    from amid.server.local_client import call as admin_call
    from amid.server.workspace import Workspace, read_server_marker

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
    for event in report.worker_events:
        _echo_worker(report.stage, event)
    if report.final_attempt_id:
        click.echo(f"[{report.stage}] final attempt {report.final_attempt_id}")
    if report.waiting:
        click.echo(f"[{report.stage}] waiting: {report.waiting}")
    sys.stdout.flush()  # a supervisor killed later loses no line it printed (stdout to a file is buffered)


LAUNCHES = ("started", "restarted", "resumed", "delivered")


def _echo_worker(stage: str, event: dict[str, Any]) -> None:
    """Every worker event on stdout; one that failed (with a reason: an exit that was not clean, a
    start that failed, a pause of the breaker) also on stderr, so a stuck worker is never silent."""
    agent, name = event["agent_id"], event["event"]
    where = ""
    if name in LAUNCHES:
        where = f" (sandbox {event.get('sandbox')}, session {'resumed' if event.get('resume') else 'new'})"
    click.echo(f"[{stage}] worker {agent} {name}{where}")
    if event.get("reason"):
        pause = f" for {event['pause_s']:g} s" if name == "paused" else ""
        click.echo(f"amid supervise: worker {agent} {name}{pause}: {event['reason']}", err=True)


async def supervise(
    url: str, token: str, *, poll_s: float, until_done: bool, max_s: float | None, workers: Workers | None = None
) -> TickReport:
    """Run the supervisor against the server at `url` until the run is done (or max_s passes)."""
    from amid.server.mcp_client import call, connect
    from amid.server.supervisor.loop import Supervisor

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


WORKER_FLAGS: dict[str, tuple[Any, str]] = {  # WorkerSettings field: (click type, help)
    "sandbox": (click.Choice(["bwrap", "none"]), "worker isolation: bwrap (required, default) or none (unconfined)"),
    "stall_timeout_s": (float, "no output and no tool call this long: stalled, resumed [1200]"),
    "crash_burst": (int, "failures within --crash-window-s that pause a worker [3]"),
    "crash_window_s": (float, "window of the crash-burst breaker, seconds [30]"),
    "crash_pause_s": (float, "how long the breaker pauses a worker, seconds [300]"),
    "usage_limit_backoff_s": (float, "wait after a usage-limit exit, seconds [900]"),
    "npm_prefix": (click.Path(path_type=Path), "npm prefix of the agent CLIs (its node_modules/.bin or bin/)"),
    "cli_path": (click.Path(path_type=Path), "the agent CLI's executable (instead of PATH / --npm-prefix)"),
    "model_base_url": (
        str,
        "custom model endpoint: Anthropic API (claude-code), OpenAI Responses (codex), "
        "OpenAI Chat Completions (opencode)",
    ),
    "model_api_key_env": (str, "environment variable holding the endpoint's API key"),
    "model_name": (str, "model name to ask the custom endpoint for"),
}


def _worker_options(command: Any) -> Any:
    for name, (kind, text) in reversed(WORKER_FLAGS.items()):
        command = click.option(f"--{name.replace('_', '-')}", name, type=kind, default=None, help=text)(command)
    return command


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
    "--worker-env",
    multiple=True,
    metavar="KEY=VALUE",
    help="environment for the managed workers' CLIs (model endpoint, API key; AMID_SCRIPTED_CHEAT=worker-3 …)",
)
@click.option(
    "--allow-host",
    "network_allow",
    multiple=True,
    metavar="HOST:PORT",
    help="another HOST:PORT a sandboxed worker may reach (repeatable); it reaches only the server and its model "
    "endpoint otherwise",
)
@_worker_options
def supervise_command(
    workspace: Path | None,
    server: str | None,
    token: str | None,
    poll_s: float,
    until_done: bool,
    max_s: float | None,
    n_workers: int,
    backend: str,
    worker_env: tuple[str, ...],
    **worker_flags: Any,
) -> None:
    """Supervise a run: stages, promotion, heartbeats, finalization (docs/ARCHITECTURE.md §9); with --workers N,
    start and manage N headless workers of a backend (claude-code, codex, opencode, scripted …),
    each in a bubblewrap sandbox (refused without one unless --sandbox none)."""
    env = _worker_env(worker_env)
    url, secret = resolve_server(workspace, server, token)
    pool = _pool(workspace, url, backend, n_workers, secret, _worker_settings(env, worker_flags)) if n_workers else None
    report = asyncio.run(supervise(url, secret, poll_s=poll_s, until_done=until_done, max_s=max_s, workers=pool))
    click.echo(f"supervisor stopped in stage {report.stage}")


def _worker_settings(env: dict[str, str], flags: dict[str, Any]) -> dict[str, Any]:
    """WorkerSettings values from the flags given; the endpoint's key is read here, from the variable named."""
    import os

    given = {name: value for name, value in flags.items() if value is not None and value != ()}
    key_env = given.pop("model_api_key_env", None)
    if key_env is not None:
        if key_env not in os.environ:
            message = f"--model-api-key-env: {key_env} is not set in this environment; export it first"
            raise InvalidInput(message, field="model_api_key_env")
        given["model_api_key"] = os.environ[key_env]
    return {"model_env": env, **given}


def _worker_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.replace("_", "").isalnum() or key[0].isdigit():
            raise InvalidInput(f"--worker-env: got {pair[:80]!r}; expected KEY=VALUE with KEY like AMID_SCRIPTED_CHEAT")
        env[key] = value
    return env


def _pool(workspace: Path | None, url: str, backend: str, n: int, token: str, values: dict[str, Any]) -> Workers:
    """Managed workers need the workspace (worktrees, tokens through the admin route)."""
    if workspace is None:
        raise InvalidInput("--workers: managed workers need -w DIR (their worktrees live in the workspace)")
    from pydantic import ValidationError

    from amid.registry.loader import worker_backend
    from amid.server.supervisor.workers.pool import WorkerPool
    from amid.server.supervisor.workers.settings import WorkerSettings
    from amid.server.workspace import Workspace

    worker_backend(backend)  # an unknown backend fails here, naming the backends there are
    try:
        settings = WorkerSettings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0])
        flag = "allow-host" if name == "network_allow" else name.replace("_", "-")
        raise InvalidInput(f"--{flag}: {first['msg']}; got {first.get('input')!r}", field=name) from None
    return WorkerPool(Workspace.open(workspace), url, backend, n, settings=settings, supervisor_token=token)
