"""`amid serve`: one long-lived process owns one workspace and serves every agent over HTTP."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator

import uvicorn

from amid.server import runtime, sandbox
from amid.server.app import build_app, http_app
from amid.server.context import Services
from amid.server.errors import Conflict
from amid.server.exposure import private_warnings
from amid.server.ledger import Identity, Ledger
from amid.server.reviewer import start_reviewer
from amid.server.settings import Settings
from amid.server.workspace import Workspace, clear_server_marker, read_server_marker, write_server_marker


def _refuse_if_served(workspace: Workspace) -> None:
    running = read_server_marker(workspace)
    if running:
        raise Conflict(
            f"workspace {workspace.root} is already served by pid {running['pid']} at {running['url']} "
            f"(started {running['started_at']}); stop it or use `amid status` / `amid sql` against it"
        )


def _open(settings: Settings) -> Services:
    workspace = Workspace.open(settings.workspace)
    _refuse_if_served(workspace)
    # No replay sandbox, no server: every review replays, and an unconfined replay sees the workspace.
    replay_kind = sandbox.resolve_kind(settings.replay_sandbox, sandbox.REPLAY)
    services = Services(settings=settings, workspace=workspace, ledger=Ledger(workspace.ledger_path))
    _sweep_partial_freezes(services)
    unconfined = ["replays run unconfined (replay_sandbox=none): they can read the workspace"]
    unconfined = unconfined if replay_kind == "none" else []
    if settings.job_sandbox == "none":
        unconfined.append("run_gpu_job jobs run unconfined (job_sandbox=none): they can read the workspace")
    _warn(services, unconfined)
    return services


def _sweep_partial_freezes(services: Services) -> None:
    """Partial copies of a freeze cut by a kill are removed before any call can freeze again."""
    from amid.server.artifacts import ArtifactStore

    if removed := ArtifactStore(services.workspace).sweep_incoming():
        services.ledger.activity.log("artifacts_swept", agent_id=None, payload={"removed": removed[:100]})


def _warn(services: Services, warnings: list[str]) -> None:
    """Say on stderr and in the ledger's event log what could read private/ (and any unconfined replay)."""
    for warning in [*warnings, *private_warnings(services.workspace.private_dir)]:
        print(f"amid: warning: {warning}", file=sys.stderr, flush=True)
        services.ledger.activity.log("server_warning", agent_id=None, payload={"warning": warning})


def _bind(settings: Settings) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise Conflict(f"port: cannot listen on {settings.host}:{settings.port} ({exc.strerror})") from None
    sock.listen(512)
    return sock


_STOP = threading.Event()


def _request_stop(signum: int, frame: object) -> None:
    """SIGTERM: stop at the next safe point (never an exception in the middle of a ledger write)."""
    _STOP.set()


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, which also stops for a SIGTERM that came after `serve_http` last looked at
    `_STOP` and before uvicorn put its own handlers in place: that signal reached only
    `_request_stop`, and the server served on until a SIGKILL (the crash suite's start-up kill, once)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            if _STOP.is_set():
                self.should_exit = True
            yield


def _start_subsystems(services: Services) -> None:
    """Beside the first calls rather than before them: re-attach to jobs that ran on while no server
    was up, and re-queue reviews a killed server left running (the pool's imports, scoring and
    scipy, take most of a second). A call that needs either meanwhile waits for it: each is built
    once, under a lock (`runtime.scheduler`, `amid.server.reviewer.reviewer`)."""
    runtime.scheduler(services)
    start_reviewer(services)
    # What start-up built (imports, pools, schemas: about a million objects) lives as long as the server;
    # left in the collector's oldest generation, each full collection walked all of it inside a tool
    # call: one call in 25-50 took 90-200 ms (ledger_growth: get_task p99 161 ms, p50 8 ms).
    gc.freeze()


def serve_http(settings: Settings, announce: Callable[[str], None] | None = None) -> None:
    # uvicorn drains in-flight calls on SIGTERM/SIGINT, then re-raises the signal to the handler it
    # found; ours only records it, so `run` returns and the `finally` below checkpoints the ledger
    # and removes the marker: a `kill` or `docker stop` is a clean stop, exit 0. A SIGTERM during
    # start-up skips serving.
    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)  # not KeyboardInterrupt: click would exit 1 ("Aborted!")
    # `kill -USR1 PID` writes every thread's stack to stderr: what a server that does not stop is waiting on.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    runtime.check_backend(settings)
    services = _open(settings)
    try:
        sock = _bind(settings)
        port = sock.getsockname()[1]
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = f"http://{host}:{port}{settings.path}"
        write_server_marker(services.workspace, url, secrets.token_urlsafe(32))
        services.ledger.activity.log("server_started", agent_id=None, payload={"url": url})
        app = build_app(services)
        starting = threading.Thread(target=_start_subsystems, args=(services,), name="amid-start", daemon=True)
        starting.start()
        config = uvicorn.Config(http_app(app), log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
        if announce:
            announce(url)
        if not _STOP.is_set():
            _Uvicorn(config).run(sockets=[sock])
        starting.join(timeout=60)  # shutdown below then closes a pool that has finished starting
    finally:
        services.ledger.db.flush()  # the calls' events first: stopping the pools can take seconds
        runtime.shutdown(services)
        clear_server_marker(services.workspace)
        services.ledger.close()


def serve_stdio(settings: Settings, agent_id: str) -> None:
    """A single local agent over stdio; identity comes from --agent, not from a token."""
    services = _open(settings)
    try:
        role = services.ledger.identities.role_of(agent_id)
        if role is None:
            services.ledger.identities.create_token(agent_id, "agent")
            role = "agent"
        app = build_app(services, local_identity=Identity(agent_id=agent_id, role=role), with_auth=False)
        start_reviewer(services)
        print(f"amid: serving {agent_id} over stdio", file=sys.stderr)
        app.mcp.run("stdio")
    finally:
        # The client closed stdin and kills this process two seconds later (the SDK's stdio client):
        # the calls' events go to the ledger before the pools are stopped.
        services.ledger.db.flush()
        runtime.shutdown(services)
        services.ledger.close()
