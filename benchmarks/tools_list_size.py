"""Size of `tools/list` in bytes and approximate tokens, per tool and in total.

Budget: the tools an agent token is shown (tools/list is filtered by the caller's role) together
≤ 4,000 tokens (context a client loads up front; 6,200 before issue 14, with output schemas).
Tokens are estimated as bytes / 4 of the compact JSON a client receives (a common rule of thumb
for English and JSON with cl100k-like tokenizers); the exact count depends on the model.

    python benchmarks/tools_list_size.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client

from amid.server.app import build_app
from amid.server.context import Services
from amid.server.ledger import Identity, Ledger
from amid.server.settings import Settings
from amid.server.tool_manifest import tool_specs
from benchmarks._common import demo_workspace, write_result

BUDGET_TOKENS = 4000


async def _listed() -> list[dict]:
    ws = demo_workspace()
    services = Services(Settings(workspace=ws.root), ws, Ledger(ws.ledger_path))
    app = build_app(services, local_identity=Identity(agent_id="bench", role="agent"), with_auth=False)
    async with Client(app.mcp, mode="legacy") as client:
        tools = (await client.list_tools()).tools
    services.ledger.close()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def main() -> None:
    tools = asyncio.run(_listed())
    agent_tools = {s.name for s in tool_specs() if "agent" in s.roles}
    rows = []
    for tool in tools:
        size = len(json.dumps(tool, separators=(",", ":")).encode())
        rows.append(
            {
                "tool": tool["name"],
                "bytes": size,
                "approx_tokens": round(size / 4),
                "agent_facing": tool["name"] in agent_tools,
            }
        )
    total = sum(r["bytes"] for r in rows)
    agent_total = sum(r["approx_tokens"] for r in rows if r["agent_facing"])
    for r in rows:
        print(f"{r['tool']:<20} {r['bytes']:>7} B  ~{r['approx_tokens']:>5} tokens")
    print(
        f"{'total':<20} {total:>7} B  ~{round(total / 4):>5} tokens; agent-facing ~{agent_total} "
        f"of budget {BUDGET_TOKENS} ({agent_total / BUDGET_TOKENS:.0%})"
    )
    path = write_result(
        "tools_list_size",
        {
            "tools": rows,
            "total_bytes": total,
            "total_approx_tokens": round(total / 4),
            "agent_tools_approx_tokens": agent_total,
            "budget_tokens": BUDGET_TOKENS,
        },
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
