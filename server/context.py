"""What a tool receives: its dependencies and the identity of its caller.

Tools never read globals or the environment; the composition root (`server.app`) builds one
`Services` per server and a `ToolContext` per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from server.ledger import Identity, Ledger
from server.settings import Settings
from server.workspace import Workspace
from tools.task.contract import TaskContract
from tools.task.folds import LockedFolds


@dataclass
class Services:
    """Long-lived dependencies shared by every call of one server."""

    settings: Settings
    workspace: Workspace
    ledger: Ledger
    extras: dict[str, Any] = field(default_factory=dict)  # later subsystems: scheduler, reviewer pool

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
