"""What a tool receives: its dependencies and the identity of its caller.

Tools never read globals or the environment; the composition root (`amid.server.app`) builds one
`Services` per server and a `ToolContext` per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from amid.server.ledger import Identity, Ledger
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from amid.tools.task.contract import TaskContract
from amid.tools.task.folds import LockedFolds

if TYPE_CHECKING:  # the subsystems' own modules are heavy and import this one; only their types here
    from amid.server.jobs.scheduler import JobScheduler
    from amid.server.report.login import DashboardLogins
    from amid.server.reviewer.pool import ReviewerPool
    from amid.tools.profile_data import ProfileRunner


@dataclass
class Services:
    """Long-lived dependencies shared by every call of one server."""

    settings: Settings
    workspace: Workspace
    ledger: Ledger
    # Subsystems, each built on first use under its module's lock and stopped with the server:
    # server/runtime.py (scheduler), server/reviewer (reviewer), tools/profile_data.py (profiler),
    # server/report/dashboard.py (dashboard_logins).
    scheduler: JobScheduler | None = None
    reviewer: ReviewerPool | None = None
    profiler: ProfileRunner | None = None
    dashboard_logins: DashboardLogins | None = None
    # Hooks the composition root (server/app.py) installs: the lane planner's profile, choose_final's
    # package builder (a context and an attempt id in, the package's path out).
    profile_provider: Callable[[Services], Any] | None = None
    build_package: Callable[[ToolContext, str], str] | None = None
    plan_lock: threading.Lock = field(default_factory=threading.Lock)  # one lane planning at a time

    @cached_property
    def contract(self) -> TaskContract:
        return self.workspace.contract()

    @cached_property
    def folds(self) -> LockedFolds:
        return self.workspace.folds()


@dataclass(frozen=True)
class ToolContext:
    services: Services
    caller: Identity

    @property
    def ledger(self) -> Ledger:
        return self.services.ledger

    @property
    def workspace(self) -> Workspace:
        return self.services.workspace

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def contract(self) -> TaskContract:
        return self.services.contract

    @property
    def folds(self) -> LockedFolds:
        return self.services.folds
