"""Time from starting `amid serve` to a first answered MCP tool call, beside a bare SDK server.

Reference: the MCP SDK's own minimal server (`MCPServer` with one tool, Streamable HTTP, uvicorn)
started the same way. Both are measured in one run, N times each, as medians; the result is the
ratio amid / reference (and the median of the paired runs' ratios, each amid run against the bare
run right after it, which is steadier under a changing machine load). The client connects,
lists the tools and makes one call, as an agent's first turn does.

    python benchmarks/serve_ready.py [--runs 5]

The server lists its tools from `server/tool_manifest.json` and imports a tool's module at that
tool's first call; the job scheduler and the reviewer pool start in a thread beside the first calls.
It also lists which heavy modules (torch, monai, nnU-Net, scipy, numpy, …) the start and a first
get_task import: none should (they load at first use, or in the reviewer pool's start thread).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.demo import stop_server
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from benchmarks._common import demo_workspace, write_result

BARE_SERVER = """
import sys
from mcp.server import MCPServer
mcp = MCPServer("bare")
@mcp.tool()
def ping() -> str:
    return "pong"
mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _first_call(url: str, token: str, tool: str, deadline: float) -> None:
    while True:
        try:
            async with connect(url, token) as client:
                await client.list_tools()  # as a real client does before its first call
                await call(client, tool)
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


def _time_amid(workspace: Path, token: str) -> float:
    port = _free_port()
    started = time.monotonic()
    command = [sys.executable, "-m", "amid", "serve", "-w", str(workspace), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(_first_call(f"http://127.0.0.1:{port}/mcp", token, "get_task", started + 60))
        return time.monotonic() - started
    finally:
        stop_server(process)  # type: ignore[arg-type]


def _time_bare(script: Path) -> float:
    port = _free_port()
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        asyncio.run(_first_call(f"http://127.0.0.1:{port}/mcp", "none", "ping", started + 60))
        return time.monotonic() - started
    finally:
        stop_server(process)  # type: ignore[arg-type]


HEAVY = ("torch", "monai", "nnunetv2", "scipy", "numpy", "nibabel", "SimpleITK", "PIL", "huggingface_hub", "pandas")
CRITICAL_PATH = """
import asyncio, json, sys
from pathlib import Path
from mcp import Client
from amid.server.context import Services
from amid.server.ledger import Identity, Ledger
from amid.server.serve import build_app, http_app
from amid.server.settings import Settings
from amid.server.workspace import Workspace
ws = Workspace.open(Path(sys.argv[1]))
services = Services(settings=Settings(workspace=ws.root), workspace=ws, ledger=Ledger(ws.ledger_path))
app = build_app(services, local_identity=Identity(agent_id="bench", role="agent"), with_auth=False)
http_app(app)
async def first() -> None:
    async with Client(app.mcp, mode="legacy") as client:
        await client.call_tool("get_task", {"include_case_ids": False})
asyncio.run(first())
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def heavy_on_critical_path(workspace: Path) -> list[str]:
    """Heavy modules imported by `amid serve`'s start and a first get_task (the reviewer pool, which
    starts beside them in a thread, is left out: it is not on the path)."""
    command = [sys.executable, "-c", CRITICAL_PATH, str(workspace), json.dumps(HEAVY)]
    return list(json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ws = demo_workspace()
    token = admin_call(ws, "token_create", {"name": "bench", "role": "agent"})["token"]
    script = Path(tempfile.mkdtemp()) / "bare.py"
    script.write_text(BARE_SERVER, encoding="utf-8")
    heavy = heavy_on_critical_path(ws.root)
    load_before = os.getloadavg()[0]
    amid_s, bare_s = [], []
    for _ in range(args.runs):
        amid_s.append(_time_amid(ws.root, token))
        bare_s.append(_time_bare(script))
    amid_median, bare_median = statistics.median(amid_s), statistics.median(bare_s)
    paired = statistics.median(a / b for a, b in zip(amid_s, bare_s, strict=True))
    print(
        f"amid serve → first get_task: median {amid_median:.2f} s over {args.runs} runs {[round(x, 2) for x in amid_s]}"
    )
    print(f"bare SDK server → first ping: median {bare_median:.2f} s {[round(x, 2) for x in bare_s]}")
    print(f"ratio amid / bare SDK: {amid_median / bare_median:.2f} (median of paired ratios {paired:.2f})")
    print(f"heavy modules on the critical path (start + first get_task): {heavy or 'none'}")
    path = write_result(
        "serve_ready",
        {
            "runs": args.runs,
            "amid_s": amid_s,
            "bare_sdk_s": bare_s,
            "amid_median_s": amid_median,
            "bare_median_s": bare_median,
            "ratio": amid_median / bare_median,
            "median_paired_ratio": paired,
            "cpu_count": os.cpu_count(),
            "load_average_1min_before": round(load_before, 2),
            "load_average_1min_after": round(os.getloadavg()[0], 2),
            "heavy_modules_checked": list(HEAVY),
            "heavy_modules_on_critical_path": heavy,
            "before_issue_14": {"amid_median_s": 3.37, "bare_median_s": 1.50, "ratio": 2.25},
            # every tool module imported and 30 schemas derived before the first answer (cef604b)
            "before_tool_manifest": {"amid_median_s": 2.11, "bare_median_s": 1.46, "ratio": 1.44},
        },
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
