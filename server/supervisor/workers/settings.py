"""Settings of managed workers (docs/ARCHITECTURE.md §9 Lifecycle), read once by the supervisor and frozen."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

CONTINUE_PROMPT = "Continue the AMID loop on your lane: call get_task, then keep working toward a reviewed attempt."
HOST_PORT = r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$"
STALL_PROMPT = "You were silent for a long time. Call get_task, read your inbox, and continue your lane."


class WorkerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stall_timeout_s: float = Field(default=1200.0, gt=0, description="no output and no tool call this long: stalled")
    crash_burst: int = Field(default=3, ge=1, description="crashes within crash_window_s that pause a worker")
    crash_window_s: float = Field(default=30.0, gt=0, description="window of the crash-burst breaker (seconds)")
    crash_pause_s: float = Field(default=300.0, ge=0, description="how long the breaker pauses a worker (seconds)")
    usage_limit_backoff_s: float = Field(
        default=900.0, ge=0, description="wait after a usage-limit exit; the same every time (non-escalating)"
    )
    min_uptime_s: float = Field(
        default=60.0, ge=0, description="a CLI without a result marker that exits sooner crashed (seconds)"
    )
    interrupt_grace_s: float = Field(default=10.0, gt=0, description="SIGTERM → SIGKILL grace (seconds)")
    restart_on_clean: bool = Field(default=True, description="resume a worker whose turn ended cleanly")
    sandbox: Literal["bwrap", "none", "auto"] = Field(
        default="bwrap",
        description="worker isolation: bwrap (required: no bubblewrap, no start) or none (unconfined, by choice); "
        "auto is an old name of bwrap",
    )
    npm_prefix: Path | None = Field(default=None, description="npm prefix where agent CLIs are installed")
    cli_path: Path | None = Field(default=None, description="the agent CLI's executable (default: PATH, npm_prefix)")
    model_base_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="a custom model endpoint (Anthropic Messages API for claude-code; OpenAI Responses for "
        "codex; OpenAI Chat Completions for opencode)",
    )
    model_api_key: str | None = Field(default=None, repr=False, description="the endpoint's API key (a secret)")
    model_name: str | None = Field(default=None, description="the model the CLI asks the custom endpoint for")
    agent_prefix: str = Field(
        default="worker", pattern=r"^[a-z0-9][a-z0-9_-]{0,30}$", description="agent ids: PREFIX-N"
    )
    task_prompt: str | None = Field(default=None, description="the first prompt (default: the AMID loop)")
    continue_prompt: str = Field(default=CONTINUE_PROMPT, description="prompt of a resume after a clean exit")
    stall_prompt: str = Field(default=STALL_PROMPT, description="prompt of a resume after a stall")
    network_allow: tuple[Annotated[str, Field(pattern=HOST_PORT)], ...] = Field(
        default=(),
        description="more HOST:PORT a sandboxed worker may reach, beside the server and its model endpoint "
        "(the only ones otherwise)",
    )
    model_env: dict[str, str] = Field(
        default_factory=dict, description="environment the CLI needs to reach its model (API keys, base URLs)"
    )
