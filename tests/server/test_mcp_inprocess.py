"""The MCP surface through the SDK's in-memory client, in both protocol modes."""

from __future__ import annotations

import json

import pytest

from amid.server.context import Services
from amid.server.tool_manifest import tool_specs
from tests.clients import local_client

MODES = ["legacy", "auto"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_get_task_returns_contract_folds_and_rules(services: Services, mode: str) -> None:
    async with local_client(services, "solo", mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("get_task", {})
    assert not result.is_error
    task = result.structured_content
    assert task is not None
    assert task["task_id"] == "demo-liver-lesion-ct"
    assert task["primary_metric"] == "dice"
    assert [m["direction"] for m in task["metrics"]] == ["higher_better", "lower_better"]
    assert task["k_folds"] == 5 and sum(f["n_val"] for f in task["folds"]) == 20
    assert any("private/" in rule for rule in task["rules"])
    assert task["stage"] == "exploration"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_tool_list_is_fixed_annotated_and_filtered_by_role(services: Services, mode: str) -> None:
    async with local_client(services, "solo", mode=mode) as client:  # type: ignore[arg-type]
        listed = (await client.list_tools()).tools
        again = (await client.list_tools()).tools
    agent_specs = [s for s in tool_specs() if "agent" in s.roles]
    assert [t.name for t in listed] == [s.name for s in agent_specs] == [t.name for t in again]
    assert {"send_heartbeat", "set_stage"} <= {s.name for s in tool_specs()} - {t.name for t in listed}
    for tool, spec in zip(listed, agent_specs, strict=True):
        assert tool.annotations is not None and tool.annotations.read_only_hint == spec.read_only
        assert tool.output_schema is None  # results carry structured content; the schema is not published
        assert tool.description and len(tool.description) < 400


@pytest.mark.anyio
async def test_a_supervisor_lists_every_tool_it_may_call(services: Services) -> None:
    async with local_client(services, "boss", "supervisor") as client:  # type: ignore[arg-type]
        listed = [t.name for t in (await client.list_tools()).tools]
    assert listed == [s.name for s in tool_specs() if "supervisor" in s.roles]


@pytest.mark.anyio
async def test_result_text_is_compact_json_of_the_structured_content(services: Services) -> None:
    async with local_client(services, "solo") as client:  # type: ignore[arg-type]
        result = await client.call_tool("get_task", {})
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    assert text == json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.anyio
async def test_bad_input_names_the_field(services: Services) -> None:
    async with local_client(services, "boss", "supervisor") as client:  # type: ignore[arg-type]
        result = await client.call_tool("send_heartbeat", {"agent_id": "nobody", "kind": "reflection", "prompt": "x"})
        assert result.is_error
        assert "NOT_FOUND: agent_id: no agent 'nobody'" in result.content[0].text  # type: ignore[union-attr]
        result = await client.call_tool("send_heartbeat", {"agent_id": "boss", "kind": "nap", "prompt": "x"})
        assert result.is_error and "kind" in result.content[0].text  # type: ignore[union-attr]
    assert services.ledger.db.scalar("SELECT count(*) FROM heartbeats") == 0


@pytest.mark.anyio
async def test_role_is_enforced_for_local_agents_too(services: Services) -> None:
    async with local_client(services, "solo") as client:  # type: ignore[arg-type]
        result = await client.call_tool("run_snapshot", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "FORBIDDEN: role: got 'agent' (agent 'solo'); expected human, supervisor for run_snapshot" in text
