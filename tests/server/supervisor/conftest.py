"""Supervisor scenarios: a supervisor driven through the real in-process MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from amid.server.context import Services
from amid.server.mcp_client import call
from amid.server.reviewer import stop_reviewer
from amid.server.supervisor.loop import Supervisor
from tests.clients import local_client

FAST = {"coverage_attempts": 1, "plateau_after": 2, "consolidate_every": 2}

Make = Callable[..., Services]


@pytest.fixture
def tuned(services: Services) -> Iterator[Make]:
    """The test's services with supervisor thresholds set (the same ledger and workspace); a reviewer
    pool a request_review started is stopped before the ledger closes."""
    made: list[Services] = []

    def make(**settings: Any) -> Services:
        made.append(replace(services, settings=services.settings.model_copy(update={**FAST, **settings})))
        return made[-1]

    yield make
    for one in made:
        if one.reviewer is not None:
            stop_reviewer(one)


@asynccontextmanager
async def supervisor_of(services: Services) -> AsyncIterator[Supervisor]:
    async with local_client(services, "boss", "supervisor") as client:

        async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return await call(client, name, arguments)

        yield Supervisor(tool)
