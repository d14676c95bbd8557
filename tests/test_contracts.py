"""Contract tests against drift: tools documented, settings documented, tool list within budget."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from mcp import Client

from amid.server.app import build_app
from amid.server.context import Services
from amid.server.ledger import Identity
from amid.server.settings import documented_settings
from amid.server.tool_manifest import tool_specs
from tests.clients import local_client

ROOT = Path(__file__).resolve().parent.parent
# 6200 with output schemas and every tool listed to every caller (before issue 14); ~3,600 now
AGENT_TOOLS_TOKEN_BUDGET = 4000  # ~10 % headroom
# The first half of an attempt cycle (get_task → profile_data → list_lanes → claim_lane) on the demo,
# arguments and result texts, bytes / 4; benchmarks/protocol_tokens.py counts the whole cycle with a
# real tokenizer (o200k: 9,626 → 6,992 tokens, results no longer indented).
CYCLE_START_TOKEN_BUDGET = 4700  # ~4,360 now


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_starts_with_the_two_setup_commands() -> None:
    block = re.search(r"```bash\n(.*?)```", _readme(), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "demo: setup" in makefile and "test: setup" in makefile


def test_every_tool_is_in_the_readme_and_in_a_skill() -> None:
    readme = _readme()
    skills = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "skills").glob("*/SKILL.md"))
    for spec in tool_specs():
        assert f"| `{spec.name}` |" in readme, spec.name
        assert f"`{spec.name}`" in skills, spec.name


def test_every_setting_is_documented_in_the_readme_with_help_text() -> None:
    readme = _readme()
    for name, help_text in documented_settings().items():
        assert help_text, name
        assert f"| `{name}` |" in readme, name


def test_every_skill_has_front_matter_with_name_and_description() -> None:
    for path in (ROOT / "skills").glob("*/SKILL.md"):
        match = re.match(r"---\nname: (.+)\ndescription: (.+)\n---\n", path.read_text(encoding="utf-8"))
        assert match and match.group(1) == path.parent.name, path


def test_agent_facing_tool_definitions_fit_the_token_budget(services: Services) -> None:
    app = build_app(services, local_identity=Identity(agent_id="x", role="agent"), with_auth=False)

    async def listed() -> list[dict]:
        async with Client(app.mcp, mode="legacy") as client:
            return [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools
            ]

    agent_tools = [s.name for s in tool_specs() if "agent" in s.roles]
    seen = asyncio.run(listed())
    assert [t["name"] for t in seen] == agent_tools  # an agent token is shown only what it may call
    size = sum(len(json.dumps(t, separators=(",", ":"))) for t in seen)
    assert size / 4 <= AGENT_TOOLS_TOKEN_BUDGET


def test_the_start_of_an_attempt_cycle_fits_its_token_budget(services: Services) -> None:
    async def cycle() -> list[tuple[dict, str]]:
        async with local_client(services, "solo") as client:
            steps: list[tuple[str, dict]] = [("get_task", {}), ("profile_data", {"wait_s": 55}), ("list_lanes", {})]
            seen = []
            for tool, arguments in steps:
                result = await client.call_tool(tool, arguments)
                seen.append((arguments, result.content[0].text))  # type: ignore[union-attr]
            lane = json.loads(seen[-1][1])["lanes"][0]["lane_id"]
            claimed = await client.call_tool("claim_lane", {"lane_id": lane})
            return [*seen, ({"lane_id": lane}, claimed.content[0].text)]  # type: ignore[union-attr]

    calls = asyncio.run(cycle())
    assert all(json.loads(text) and "\n" not in text for _, text in calls)  # compact JSON, no indentation
    size = sum(len(json.dumps(arguments, separators=(",", ":"))) + len(text.encode()) for arguments, text in calls)
    assert size / 4 <= CYCLE_START_TOKEN_BUDGET


def test_every_error_class_has_a_distinct_code() -> None:
    from amid.server import errors

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.AmidError)]
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)) >= 7
