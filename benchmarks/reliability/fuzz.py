"""Fuzz figures: ≥ 1,000 schema-driven calls against a real `amid serve` over HTTP.

    python benchmarks/reliability/fuzz.py [--per-tool 36]

Writes benchmarks/results/fuzz.json: calls, calls by tool and by kind, codes seen, tracebacks
(replies and server log), untyped replies, HTTP 5xx, protocol errors, partial writes. The calls are
derandomised hypothesis examples (tests/reliability/fuzzing.py), the same on every run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server.connect import ensure_worktree
from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from benchmarks._common import demo_workspace, write_result
from tests.reliability.fuzzing import Fuzzer, prepare_worktree
from tests.reliability.test_fuzz import ledger_counter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-tool", type=int, default=36, help="hypothesis examples per tool (30 tools)")
    args = parser.parse_args()
    workspace = demo_workspace()
    prepare_worktree(ensure_worktree(workspace, "alice"))
    process, url = start_server(workspace.root)
    started = time.monotonic()
    try:
        tokens = {
            role: admin_call(workspace, "token_create", {"name": name, "role": role})["token"]
            for name, role in (("alice", "agent"), ("boss", "supervisor"), ("hugo", "human"))
        }
        fuzzer = Fuzzer(url, tokens, ledger_counter(workspace), workspace.root)
        with fuzzer.session():
            for tool, schema in fuzzer.schemas().items():
                fuzzer.fuzz(tool, schema, args.per_tool, strict=False)
    finally:
        stop_server(process)
    log = (workspace.root / ".amid" / "serve.log").read_text(encoding="utf-8")
    summary = fuzzer.tally.summary()
    summary |= {
        "log_tracebacks": log.count("Traceback"),
        "log_bytes": len(log.encode()),
        "wall_s": round(time.monotonic() - started, 1),
        "violations": fuzzer.tally.violations()[:20],
    }
    path = write_result("fuzz", summary)
    print(
        f"{summary['calls']} calls, {summary['tracebacks'] + summary['log_tracebacks']} tracebacks, "
        f"{summary['untyped']} untyped, {summary['http_5xx']} HTTP 5xx, {summary['partial_writes']} partial writes "
        f"-> {path}"
    )


if __name__ == "__main__":
    main()
