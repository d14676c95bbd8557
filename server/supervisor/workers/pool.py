"""WorkerPool: N managed workers of one backend, started, watched, resumed with prompts and retired.

Per worker: a worktree and a fresh token, the CLI's config files, its own home (the user's login files
copied in), the headless CLI started with the task prompt inside the worker sandbox, its session id read
from the CLI's JSON output. No sandbox, no start: bubblewrap is required unless the settings say
`sandbox: none`. A sandboxed worker's network reaches only its allowlist (the server, its model
endpoint, `network_allow`), through a bridge the pool serves (server/worker_network.py). `deliver`
interrupts the CLI (SIGTERM to its process group) and resumes the same session with the prompt. `poll`
classifies exits, runs the stall watchdog (exempt while the worker's job or review is pending, asked
live through the server) and the crash-burst breaker, and returns what happened as events; a CLI that
cannot start or keeps failing carries the reason (its last output lines). Every transition is recorded
through the server's supervisor-only `record_worker` tool, with the sandbox and the heartbeats each
launch carried: a supervisor killed and started again reads them back, resumes each live session and
gives it the heartbeats it never got.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.from_thread

from amid.registry.loader import worker_backend
from amid.registry.schemas import WorkerBackend
from amid.server import sandbox, worker_network
from amid.server.connect import issue_token, prepare_worktree
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.protocol import INSTRUCTIONS
from amid.server.supervisor.workers.backend import (
    argv,
    classify_exit,
    find_binary,
    reason_lines,
    write_config_files,
)
from amid.server.supervisor.workers.endpoint import endpoint_for, model_targets
from amid.server.supervisor.workers.install import cli_install
from amid.server.supervisor.workers.process import WorkerProcess
from amid.server.supervisor.workers.settings import WorkerSettings
from amid.server.workspace import Workspace

Event = dict[str, Any]
UNCONFINED_NET = "host (sandbox none: every address this user can reach)"
REASON_LINES = 3  # of the CLI's last output, in the event of an exit that is not clean


@dataclass(frozen=True)
class Prompt:
    """A prompt for a worker's CLI; a heartbeat's id travels with it, so the ledger knows it was given."""

    text: str
    heartbeat_id: int | None = None


@dataclass
class Worker:
    agent_id: str
    worktree: Path
    home: Path
    log_path: Path
    token: str
    state: str = "starting"
    session_id: str | None = None
    process: WorkerProcess | None = None
    resumed_from: str | None = None
    crashes: deque[float] = field(default_factory=deque)
    wake_at: float | None = None
    queued: list[Prompt] = field(default_factory=list)  # delivered while paused: given at the wake-up
    unanswered: list[Prompt] = field(default_factory=list)  # delivered prompts no session has taken in yet
    last_reason: str | None = None  # why the CLI last failed, from its output

    @property
    def pending_prompt(self) -> str | None:
        return "\n\n".join(p.text for p in self.queued) or None


class WorkerPool:
    def __init__(
        self,
        workspace: Workspace,
        server_url: str,
        backend: str | WorkerBackend,
        n: int,
        settings: WorkerSettings | None = None,
        supervisor_token: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.server_url = server_url
        self.backend = worker_backend(backend) if isinstance(backend, str) else backend
        self.n = n
        self.settings = settings or WorkerSettings()
        self.sandbox_kind = sandbox.resolve_kind(self.settings.sandbox, sandbox.WORKER)  # fails closed
        self.binary = find_binary(self.backend, self.settings.npm_prefix, self.settings.cli_path)
        s = self.settings
        self._endpoint = endpoint_for(self.backend.id, s.model_base_url, s.model_api_key, s.model_name)
        model = model_targets(self.backend, s.model_base_url, s.model_env)
        self.network_allow = worker_network.allowlist(server_url, model, s.network_allow)
        self._bridge: worker_network.NetworkBridge | None = None
        self._networks: dict[str, worker_network.BoxNetwork] = {}
        self._supervisor_token = supervisor_token
        self._workers: dict[str, Worker] = {}
        self._events: list[Event] = []
        self._portal: Any = None

    @property
    def agents(self) -> list[str]:
        return list(self._workers)

    def worker(self, agent_id: str) -> Worker:
        return self._workers[agent_id]

    def start(self) -> None:
        """Create every worker's worktree, token and config, and start its CLI: a live session the ledger
        remembers is resumed with the heartbeats it never got, else a new one gets the task prompt."""
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        if self._supervisor_token is None:
            self._supervisor_token = issue_token(self.workspace, f"{self.settings.agent_prefix}-pool", "supervisor")[
                "token"
            ]
        for index in range(1, self.n + 1):
            worker = self._prepare(f"{self.settings.agent_prefix}-{index}")
            self._workers[worker.agent_id] = worker
            self._begin(worker)

    def deliver(self, agent_id: str, prompt: str, heartbeat_id: int | None = None) -> None:
        """Interrupt the worker and resume its session with `prompt` (queued while it is paused)."""
        worker = self._workers[agent_id]
        given = Prompt(prompt, heartbeat_id)
        if worker.state in ("paused", "backoff", "retired"):
            worker.queued.append(given)
            self._emit(worker, worker.state, "queued", prompt=prompt, heartbeat_id=heartbeat_id)
            return
        process = worker.process
        if process is None or process.session_id is not None:
            worker.unanswered = []  # the turn ended, or the CLI has the prompt in its session already
        # A turn interrupted before the CLI took its prompt into a session: the prompt travels with the new one.
        worker.unanswered.append(given)
        self._interrupt(worker)
        self._launch(worker, list(worker.unanswered), resume=worker.session_id is not None, event="delivered")

    def poll(self) -> list[Event]:
        """Check every worker once (exits, stalls, wake-ups); return the events since the last poll."""
        for worker in self._workers.values():
            self._check(worker)
        events, self._events = self._events, []
        return events

    def stop(self) -> None:
        """Retire every worker: stop its CLI, release its lane claims, revoke its token, record it."""
        for worker in self._workers.values():
            if worker.state != "retired":
                self._interrupt(worker)
                self._emit(worker, "retired", "retired")
                admin_call(self.workspace, "retire_agent", {"name": worker.agent_id})  # its claims too, as events
        if self._bridge is not None:
            self._bridge.stop()  # after the CLIs: none is cut off mid-turn
            self._bridge, self._networks = None, {}
        if self._portal is not None:
            self._portal_cm.__exit__(None, None, None)
            self._portal = None

    # --- one worker ---

    def _prepare(self, agent_id: str) -> Worker:
        token = issue_token(self.workspace, agent_id)["token"]
        worktree = prepare_worktree(self.workspace, agent_id, token, self.workspace.contract().title)
        state = self.workspace.sub("workers") / agent_id
        home = state / "home"
        home.mkdir(parents=True, exist_ok=True)
        self._copy_login(home)
        worker = Worker(agent_id, worktree, home, state / "output.jsonl", token)
        write_config_files(self.backend, self._values(worker), worktree, home)
        return worker

    def _copy_login(self, home: Path) -> None:
        user_home = Path.home()
        for name in self.backend.login_files:
            source = user_home / name
            if source.is_file() and not (home / name).exists():
                (home / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, home / name)

    def _values(self, worker: Worker, prompt: str = "") -> dict[str, str]:
        return {
            "binary": self.binary,
            "python": self.binary if self.backend.binary == "{python}" else "python3",
            "prompt": prompt,
            "session_id": worker.session_id or "",
            "url": self.server_url,
            "token_env": self.backend.token_env,
            "worktree": str(worker.worktree),
            "home": str(worker.home),
            "memory_dir": str(worker.worktree / ".amid-local" / "claude-memory"),
        }

    def _begin(self, worker: Worker) -> None:
        known = self._record(worker, None, "")
        backlog = [Prompt(h["prompt"], h["heartbeat_id"]) for h in known.get("undelivered_heartbeats") or []]
        if known.get("session_id") and known.get("state") not in (None, "retired"):
            worker.session_id = str(known["session_id"])  # a supervisor killed mid-run: the session lives on
            prompts = backlog or [Prompt(self.settings.continue_prompt)]
            self._launch(worker, prompts, resume=True, event="restarted")
            return
        self._launch(worker, [self._task_prompt()], resume=False, event="started")

    def _task_prompt(self) -> Prompt:
        return Prompt(self.settings.task_prompt or INSTRUCTIONS)

    def _launch(self, worker: Worker, prompts: list[Prompt], *, resume: bool, event: str) -> None:
        if not resume and prompts[:1] != [self._task_prompt()]:
            # A new session (the CLI stalled or was interrupted before it named one) starts with the task: a
            # stall or heartbeat prompt alone would leave it a worker that never read what it is for.
            prompts = [self._task_prompt(), *prompts]
        text = "\n\n".join(p.text for p in prompts)
        command = argv(self.backend, self._values(worker, text), resume=resume)
        command = [command[0], *self._endpoint.args, *command[1:]]
        if self.sandbox_kind == "bwrap":
            command = sandbox.wrap_worker(command, self._view(worker))
        worker.resumed_from = worker.session_id if resume else None
        worker.wake_at = None
        detail: dict[str, Any] = {"resume": resume, "prompt": text[:200], "sandbox": self.sandbox_kind}
        detail["network"] = self._network(worker).describe() if self.sandbox_kind == "bwrap" else UNCONFINED_NET
        ids = [p.heartbeat_id for p in prompts if p.heartbeat_id is not None]
        # Recorded before the CLI starts, and the record marks them delivered: given once at most, never again
        # by a resume or in a tool result (a supervisor killed in the instant before the start loses them).
        self._emit(worker, "running", event, **detail, **({"heartbeat_ids": ids} if ids else {}))
        try:
            worker.process = WorkerProcess(self.backend, command, worker.worktree, self._env(worker), worker.log_path)
        except OSError as exc:  # the binary vanished, is not executable, the worktree is gone …
            worker.process, worker.last_reason = None, f"cannot start {command[0]}: {exc}"
            self._emit(worker, "idle", "start_failed", **detail, reason=worker.last_reason)
            self._crashed(worker)

    def _env(self, worker: Worker) -> dict[str, str]:
        passed = {k: os.environ[k] for k in sandbox.PASSED_ENV if k in os.environ}
        values = self._values(worker)
        fixed = {k: v.format_map(values) if "{" in v else v for k, v in self.backend.env.items()}
        home = {"HOME": str(worker.home), "XDG_CONFIG_HOME": str(worker.home / ".config")}
        token = {self.backend.token_env: worker.token, "AMID_URL": self.server_url}
        return {**passed, **fixed, **self._endpoint.env, **self.settings.model_env, **home, **token}

    def _view(self, worker: Worker) -> sandbox.WorkerView:
        """Its own repository and home; the task, the memory and the CLI's installation read-only;
        the server's files, the run's repository, other agents' repositories and homes hidden."""
        ws = self.workspace
        others = [p for p in ws.worktrees_dir.iterdir() if p.name != worker.agent_id]
        others += [p for p in ws.sub("workers").iterdir() if p.name != worker.agent_id]
        server = (ws.private_dir, ws.control_dir, ws.ledger_path, ws.sub("artifacts"), ws.sub("reviews"))
        hidden = (*server, ws.repo_dir, ws.commit_store, *(Path(p) for p in ws.origin().values()), *others)
        install = cli_install(self.binary, os.environ.get("PATH", os.defpath))
        return sandbox.WorkerView(
            worktree=worker.worktree,
            home=worker.home,
            readable=(ws.task_dir, ws.memory_dir, *install.folders),
            hidden=hidden,
            links=install.links,
            network=self._network(worker),
        )

    def _network(self, worker: Worker) -> worker_network.BoxNetwork:
        """The worker's way out (opened once, kept across its launches): only `network_allow`."""
        if self._bridge is None:
            self._bridge = worker_network.NetworkBridge()
        if worker.agent_id not in self._networks:
            self._networks[worker.agent_id] = self._bridge.open(self.network_allow)
        return self._networks[worker.agent_id]

    def _interrupt(self, worker: Worker) -> None:
        process = worker.process
        if process is None:
            return
        worker.session_id = process.session_id or worker.session_id
        if process.exited() is None:
            code = process.interrupt(self.settings.interrupt_grace_s)
            self._emit(worker, worker.state, "interrupted", returncode=code)
        worker.process = None

    def _check(self, worker: Worker) -> None:
        process = worker.process
        if worker.state in ("paused", "backoff") and worker.wake_at is not None and time.monotonic() >= worker.wake_at:
            self._wake(worker)
            return
        if process is None or worker.state != "running":
            return
        if process.session_id is not None and process.session_id != worker.session_id:
            worker.session_id = process.session_id  # recorded at once: a killed supervisor's successor resumes it
            self._emit(worker, "running", "session", session_id=process.session_id)
        code = process.exited()
        if code is not None:
            self._exited(worker, process, code)
        elif process.silent_s() >= self.settings.stall_timeout_s and not self._busy(worker):
            self._interrupt(worker)
            self._emit(worker, "running", "stalled", silent_s=round(process.silent_s(), 1))
            stall = [Prompt(self.settings.stall_prompt)]
            self._launch(worker, stall, resume=worker.session_id is not None, event="resumed")

    def _wake(self, worker: Worker) -> None:
        """The pause or backoff is over: resume with the prompts queued meanwhile (a worker that never
        got a session starts afresh, the task prompt first)."""
        queued, worker.queued = worker.queued, []
        if worker.session_id is None:
            self._launch(worker, [self._task_prompt(), *queued], resume=False, event="resumed")
            return
        self._launch(worker, queued or [Prompt(self.settings.continue_prompt)], resume=True, event="resumed")

    def _exited(self, worker: Worker, process: WorkerProcess, code: int) -> None:
        worker.process = None
        exit_class = classify_exit(
            self.backend,
            returncode=code,
            saw_result=process.saw_result,
            output_tail="\n".join(process.tail),
            uptime_s=process.uptime_s(),
            min_uptime_s=self.settings.min_uptime_s,
            resumed=worker.resumed_from,
            reported=process.session_id,
        )
        lines = reason_lines(list(process.tail), REASON_LINES)
        worker.last_reason = f"{exit_class}, exit status {code}: " + (" | ".join(lines)[-600:] or "no output")
        reason = {} if exit_class == "clean" else {"reason": worker.last_reason}
        self._emit(worker, "idle", "exited", exit_class=exit_class, returncode=code, **reason)
        if exit_class == "usage_limit":
            worker.wake_at = time.monotonic() + self.settings.usage_limit_backoff_s
            self._emit(worker, "backoff", "backoff", wait_s=self.settings.usage_limit_backoff_s)
            return
        if exit_class == "clean":
            if self.settings.restart_on_clean:
                self._launch(worker, [Prompt(self.settings.continue_prompt)], resume=True, event="resumed")
            return
        if exit_class == "session_error":
            worker.session_id = None  # the session is gone: the next run starts afresh
        self._crashed(worker)

    def _crashed(self, worker: Worker) -> None:
        now = time.monotonic()
        worker.crashes.append(now)
        while worker.crashes and now - worker.crashes[0] > self.settings.crash_window_s:
            worker.crashes.popleft()
        if len(worker.crashes) >= self.settings.crash_burst:
            worker.crashes.clear()
            worker.wake_at = now + self.settings.crash_pause_s
            s = self.settings
            reason = f"{s.crash_burst} failures within {s.crash_window_s:g} s; last: {worker.last_reason}"
            self._emit(worker, "paused", "paused", pause_s=s.crash_pause_s, reason=reason)
            return
        if worker.session_id is not None:
            self._launch(worker, [Prompt(self.settings.continue_prompt)], resume=True, event="resumed")
            return
        self._launch(worker, [self._task_prompt()], resume=False, event="started")

    # --- through the server ---

    def _busy(self, worker: Worker) -> bool:
        """Live: a pending job or review, or a tool call within the stall timeout, exempts the worker."""
        status = self._record(worker, None, "")
        recent = status.get("last_tool_call_s_ago")
        quiet = recent is None or recent >= self.settings.stall_timeout_s
        return bool(status.get("pending_jobs") or status.get("pending_reviews")) or not quiet

    def _emit(self, worker: Worker, state: str, event: str, **detail: Any) -> None:
        worker.state = state
        self._events.append({"agent_id": worker.agent_id, "event": event, "state": state, **detail})
        self._record(worker, state, event, **detail)

    def _record(self, worker: Worker, state: str | None, event: str, **detail: Any) -> dict[str, Any]:
        arguments = {
            "agent_id": worker.agent_id,
            "backend": self.backend.id,
            "state": state,
            "event": event,
            "session_id": worker.session_id,
            "detail": detail,
        }

        async def record() -> dict[str, Any]:
            async with connect(self.server_url, str(self._supervisor_token)) as client:
                return await call(client, "record_worker", arguments)

        return dict(self._portal.call(record))
