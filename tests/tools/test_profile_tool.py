"""profile_data through the in-memory MCP client on the demo workspace."""

from __future__ import annotations

import json

import pytest

from amid.server.context import Services
from tests.clients import local_client


@pytest.mark.anyio
async def test_profile_reports_geometry_predicates_and_writes_the_full_report(services: Services) -> None:
    async with local_client(services, "ann") as client:
        first = await client.call_tool("profile_data", {"wait_s": 50})
        assert not first.is_error, first.content
        result = first.structured_content or {}
        assert result["status"] == "ready"
        profile = result["profile"]
        assert profile["predicates"]["dims_3d"] and profile["predicates"]["anisotropic"]
        assert profile["predicates"]["group_leak_risk"]  # two scans per patient
        assert profile["predicate_evidence"]["anisotropic"]["spacing_ratio"] == pytest.approx(5.0)
        assert len(json.dumps(profile)) / 4 < 8000
        again = (await client.call_tool("profile_data", {"wait_s": 0})).structured_content or {}
        assert again["status"] == "ready" and again["fingerprint"] == result["fingerprint"]
    report = services.workspace.sub("memory/profile")
    assert {p.name for p in report.iterdir()} >= {"profile.json", "profile.md", "cases.parquet"}


@pytest.mark.anyio
async def test_a_refresh_that_outlasts_the_wait_returns_running_then_ready(services: Services) -> None:
    async with local_client(services, "ann") as client:
        started = (await client.call_tool("profile_data", {"refresh": True, "wait_s": 0})).structured_content or {}
        assert started["status"] == "running" and "call profile_data again" in started["message"]
        finished = (await client.call_tool("profile_data", {"wait_s": 50})).structured_content or {}
    assert finished["status"] == "ready"
