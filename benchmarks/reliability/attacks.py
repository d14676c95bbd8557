"""Attack suite: what a wrong, lazy or gaming agent (or a web page) may try against a real `amid serve`.

Classes: traversal and symlinks in every path argument (found in the real tools/list input schemas)
and in every identifier that names a stored thing; role violations (agent and human tokens on tools
of other roles, an agent token on the admin routes); cross-agent actions (on another agent's
attempt, job, lane, skill); Host and Origin headers of another site (DNS rebinding); oversize
bodies and arguments; a revoked token; an idempotency key replayed with other content. Each attack
must be refused — a coded tool error (`CODE: …`) or an HTTP 4xx — and leave no trace: no ledger
table (events aside: it logs every call) gains or loses a row and no workspace file appears.

    python benchmarks/reliability/attacks.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx2
from mcp import Client

from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.workspace import Workspace
from benchmarks.reliability._server import Server

CODED = re.compile(r"\b(INVALID_INPUT|NOT_FOUND|CONFLICT|FORBIDDEN|DATA_UNREADABLE|JOB_FAILED): ")
ECHO_LIMIT = 4000  # bytes of an error reply; a refusal must not echo a huge argument back
MB = 1 << 20
PATH_NAME = re.compile(r"(^|_)(path|paths|dir|cwd|folder|file|checkpoint|submission|logs|predictions|manifest)$")
PATH_DESCRIPTION = re.compile(r"\b(path|paths|folder|directory|worktree)\b", re.I)
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Outcome:
    cls: str
    name: str
    refused: bool
    coded: bool
    trace: list[str]
    reply: str
    reply_bytes: int


@dataclass
class Scene:
    """The run under attack: a server, tokens, alice's valid base payload, bob's things."""

    workspace: Workspace
    server: Server
    tokens: dict[str, str]
    python: str
    base_submit: dict[str, Any] = field(default_factory=dict)
    bob: dict[str, str] = field(default_factory=dict)  # attempt_id, job_id, lane_id, skill
    alice_lane: str = ""
    private_file: str = ""  # a file under private/, workspace-relative
    clients: dict[str, Client] = field(default_factory=dict)
    count_query: str = ""


# --- traces ----------------------------------------------------------------------------------------

WATCHED = ("artifacts", "jobs", "memory", "reviews", "exports", "package", "task", "private", "repo/.git/refs")


def snapshot(scene: Scene) -> dict[str, int]:
    """Rows per ledger table (events aside), files per workspace folder (jobs: job folders)."""
    if not scene.count_query:
        tables = admin_call(
            scene.workspace,
            "sql",
            {
                "query": "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND "
                "table_type = 'BASE TABLE' AND table_name NOT IN ('events', 'schema_migrations') ORDER BY 1"
            },
        )["rows"]
        scene.count_query = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t[0]}) AS {t[0]}" for t in tables)
    result = admin_call(scene.workspace, "sql", {"query": scene.count_query})
    found = {f"table {c}": int(v) for c, v in zip(result["columns"], result["rows"][0], strict=True)}
    root = scene.workspace.root
    for top in WATCHED:
        if top == "jobs":  # a running job writes its own files: count the jobs
            found["jobs"] = sum(1 for _ in (root / top).iterdir()) if (root / top).is_dir() else 0
            continue
        found[f"files {top}"] = sum(len(files) for _, _, files in os.walk(root / top))
    return found


def changes(before: dict[str, int], after: dict[str, int]) -> list[str]:
    keys = sorted(set(before) | set(after))
    return [f"{k}: {before.get(k, 0)} -> {after.get(k, 0)}" for k in keys if before.get(k, 0) != after.get(k, 0)]


# --- one attack ------------------------------------------------------------------------------------


async def tool_attack(scene: Scene, cls: str, name: str, who: str, tool: str, arguments: dict[str, Any]) -> Outcome:
    """Call through the real MCP client; refused = a tool error (coded: `CODE: …`) and no trace."""
    before = snapshot(scene)
    result = await scene.clients[who].call_tool(tool, arguments)
    text = " ".join(getattr(b, "text", "") for b in result.content)
    reply = text if result.is_error else json.dumps(result.structured_content)
    trace, coded = changes(before, snapshot(scene)), bool(CODED.search(text))
    return Outcome(cls, name, result.is_error and coded and not trace, coded, trace, reply[:300], len(reply.encode()))


async def http_attack(
    scene: Scene, cls: str, name: str, headers: dict[str, str], body: bytes, path: str = "/mcp"
) -> Outcome:
    """A raw HTTP request; refused = a 4xx status and no trace."""
    before = snapshot(scene)
    url = f"http://127.0.0.1:{scene.server.port}{path}"
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(url, content=body, headers={**ACCEPT, **headers})
    trace = changes(before, snapshot(scene))
    refused = 400 <= response.status_code < 500 and not trace
    return Outcome(
        cls, f"{name} (HTTP {response.status_code})", refused, True, trace, response.text[:300], len(response.content)
    )


def rpc(tool: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    ).encode()


# --- what to attack --------------------------------------------------------------------------------


def path_fields(tools: list[Any]) -> list[str]:
    """`tool.field[.sub]` of every string-valued input (or list / map of strings) that names a path."""
    found = []
    for tool in tools:
        schema = tool.input_schema
        found += [f"{tool.name}.{p}" for p in _string_fields(schema, schema.get("$defs", {}), "")]
    return sorted(found)


def _string_fields(schema: dict[str, Any], defs: dict[str, Any], prefix: str) -> list[str]:
    found = []
    for name, sub in (schema.get("properties") or {}).items():
        sub = defs.get(sub.get("$ref", "").split("/")[-1], sub)
        if sub.get("properties"):
            found += _string_fields(sub, defs, f"{prefix}{name}.")
        elif _is_stringish(sub) and (PATH_NAME.search(name) or PATH_DESCRIPTION.search(sub.get("description", ""))):
            found.append(prefix + name)
    return found


def _is_stringish(schema: dict[str, Any]) -> bool:
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    kinds |= {o.get("type") for o in schema.get("anyOf", [])}
    nested = [schema.get("items") or {}, schema.get("additionalProperties") or {}]
    return "string" in kinds or any(isinstance(n, dict) and n.get("type") == "string" for n in nested)


def traversal_values(scene: Scene) -> dict[str, str]:
    root = str(scene.workspace.root)
    return {
        "dot-dot": "../",
        "dot-dot to another worktree": "../bob",
        "dot-dot to private": "../../private",
        "dot-dot to a private file": f"../../{scene.private_file}",
        "dot-dot inside": "outputs/../../../private",
        "url-encoded dot-dot": "%2e%2e/%2e%2e/private",
        "url-encoded slash": "..%2f..%2fprivate",
        "absolute private": f"{root}/private",
        "absolute private file": f"{root}/{scene.private_file}",
        "absolute outside": "/etc/passwd",
        "root": "/",
        "NUL byte": "outputs\x00/../../private",
        "over-long component": "a" * 300,
        "over-long path": "a/" * 2100,
        ".git": ".git",
        ".git/config": ".git/config",
        "backslashes": "..\\..\\private",
        "fullwidth dots": "\uff0e\uff0e/\uff0e\uff0e/private",
        "file URL": "file:///etc/passwd",
        "tilde": "~/.ssh",
    }


SYMLINKS = {
    "symlink to private/": "evil_private",
    "symlink to a private file": "evil_private_file",
    "symlink outside": "evil_outside",
    "symlink to an outside file": "evil_outside_file",
    "symlink to another worktree": "evil_bob",
    "symlink to task/": "evil_task",
    "symlink loop": "evil_loop",
    "dangling symlink": "evil_dangling",
    "folder holding a symlinked private file": "outputs/leaky",
    "folder holding a symlinked private folder": "outputs/linkdir",
}


def plant_symlinks(scene: Scene, worktree: Path) -> None:
    ws = scene.workspace.root
    links = {
        "evil_private": ws / "private",
        "evil_private_file": ws / scene.private_file,
        "evil_outside": Path("/etc"),
        "evil_outside_file": Path("/etc/hostname"),
        "evil_bob": ws / "worktrees" / "bob",
        "evil_task": ws / "task",
        "evil_loop": worktree / "evil_loop",
        "evil_dangling": Path("/nonexistent-amid-target"),
    }
    for name, target in links.items():
        (worktree / name).symlink_to(target)
    leaky, linkdir = worktree / "outputs/leaky", worktree / "outputs/linkdir"
    leaky.mkdir(parents=True)
    (leaky / "a.nii.gz").write_bytes(b"not a real prediction")
    (leaky / "b.nii.gz").symlink_to(ws / scene.private_file)
    linkdir.mkdir()
    (linkdir / "a.nii.gz").write_bytes(b"not a real prediction")
    (linkdir / "sub").symlink_to(ws / "private")


def inject(scene: Scene, target: str, value: str) -> tuple[str, dict[str, Any]] | None:
    """The tool and arguments that put `value` into the path field `target` of an otherwise valid call."""
    tool, _, path = target.partition(".")
    if tool == "run_gpu_job" and path == "cwd":
        return tool, {"command": [scene.python, "-c", "pass"], "cwd": value}
    if tool != "submit_attempt":
        return None
    payload = json.loads(json.dumps(scene.base_submit))
    artifacts = payload["artifacts"]
    fold = next(iter(artifacts["predictions"]))
    shapes: dict[str, Callable[[], None]] = {
        "commit": lambda: payload.__setitem__("commit", value),
        "artifacts.predictions": lambda: artifacts.__setitem__("predictions", {fold: value}),
        "artifacts.logs": lambda: artifacts.__setitem__("logs", [value]),
        "artifacts.submission": lambda: artifacts.__setitem__("submission", value),
        "artifacts.checkpoint": lambda: artifacts.__setitem__("checkpoint", value),
        "artifacts.training_manifest": lambda: artifacts.__setitem__("training_manifest", value),
    }
    if path not in shapes:
        return None
    shapes[path]()
    return tool, payload


def identifier_attacks(scene: Scene) -> list[tuple[str, str, dict[str, Any]]]:
    """Identifiers that name a stored thing (and so often a file): each with traversal values."""
    values = {
        "traversal": f"../../{scene.private_file}",
        "absolute": "/etc/passwd",
        "NUL": "x\x00y",
        "over-long": "a" * 300,
    }
    calls: list[tuple[str, str, dict[str, Any]]] = []
    for label, v in values.items():
        calls += [
            (label, "get_job", {"job_id": v}),
            (label, "cancel_job", {"job_id": v}),
            (label, "get_review", {"review_id": v, "wait_s": 0}),
            (label, "get_review", {"attempt_id": v, "wait_s": 0}),
            (label, "withdraw_attempt", {"attempt_id": v}),
            (label, "request_review", {"attempt_id": v}),
            (label, "claim_lane", {"lane_id": v}),
            (label, "release_lane", {"lane_id": v}),
            (label, "post_note", {"kind": "observation", "title": "lane id attack", "body": "x", "lane_id": v}),
            (label, "get_skill", {"name": v}),
            (label, "submit_attempt", {**scene.base_submit, "lane_id": v}),
            (label, "submit_attempt", {**scene.base_submit, "parent_attempt_id": v}),
        ]
    return calls


SAMPLES: dict[str, dict[str, Any]] = {  # valid arguments per tool (role checks come first)
    "claim_lane": {"lane_id": "LANE"},
    "release_lane": {"lane_id": "LANE"},
    "propose_lane": {"title": "a lane", "family": "baseline", "hypothesis": "it helps"},
    "run_gpu_job": {"command": ["true"]},
    "cancel_job": {"job_id": "JOB"},
    "submit_attempt": {},
    "withdraw_attempt": {"attempt_id": "ATTEMPT"},
    "request_review": {"attempt_id": "ATTEMPT"},
    "post_note": {"kind": "observation", "title": "a note", "body": "x"},
    "save_skill": {"name": "role-attack", "description": "a skill from the wrong role", "body": "x" * 40},
    "run_snapshot": {},
    "send_heartbeat": {"agent_id": "alice", "kind": "custom", "prompt": "x"},
    "record_worker": {"agent_id": "alice", "backend": "scripted", "state": "running"},
    "run_evidence": {},
    "set_stage": {"from_stage": "exploration", "to_stage": "exploitation", "reason": "role attack"},
    "set_lane_state": {"lane_id": "LANE", "status": "waived", "reason": "role attack"},
    "audit_evidence": {},
    "choose_final": {"attempt_id": "ATTEMPT", "reason": "role attack"},
}


def _fill(scene: Scene, arguments: dict[str, Any], tool: str) -> dict[str, Any]:
    if tool == "submit_attempt":
        return dict(scene.base_submit)
    text = json.dumps(arguments)
    for marker, value in (
        ("LANE", scene.bob["lane_id"]),
        ("JOB", scene.bob["job_id"]),
        ("ATTEMPT", scene.bob["attempt_id"]),
    ):
        text = text.replace(f'"{marker}"', json.dumps(value))
    return dict(json.loads(text))


def role_attacks(scene: Scene) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Every tool whose roles leave out `agent` or `human`, called with that role's token."""
    from amid.server.tool_manifest import tool_specs

    found = []
    for spec in tool_specs():
        sample = SAMPLES.get(spec.name) or _required_sample(spec.input_model.model_json_schema())
        for who, role in (("alice", "agent"), ("hugo", "human")):
            if role not in spec.roles:
                found.append((f"{role} calls {spec.name}", who, spec.name, _fill(scene, sample, spec.name)))
    return found


def _required_sample(schema: dict[str, Any]) -> dict[str, Any]:
    """Placeholder values for the required fields of a tool without a hand-written sample."""
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        field_schema = schema["properties"][name]
        by_type = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
        values[name] = (field_schema.get("enum") or [None])[0] or by_type.get(field_schema.get("type"), "role-attack")
    return values


def cross_agent_attacks(scene: Scene) -> list[tuple[str, str, dict[str, Any]]]:
    bob = scene.bob
    return [
        ("withdraw another agent's attempt", "withdraw_attempt", {"attempt_id": bob["attempt_id"]}),
        ("review another agent's attempt", "request_review", {"attempt_id": bob["attempt_id"]}),
        ("cancel another agent's job", "cancel_job", {"job_id": bob["job_id"]}),
        ("read another agent's job logs", "get_job", {"job_id": bob["job_id"]}),
        ("release another agent's lane", "release_lane", {"lane_id": bob["lane_id"]}),
        ("claim a lane another agent holds", "claim_lane", {"lane_id": bob["lane_id"]}),
        (
            "overwrite another agent's skill",
            "save_skill",
            {"name": bob["skill"], "description": "taken over by alice", "body": "alice's procedure " * 3},
        ),
    ]


def oversize_attacks(scene: Scene) -> list[tuple[str, str, dict[str, Any]]]:
    big = "x" * MB
    return [
        ("1 MB note body", "post_note", {"kind": "observation", "title": "big", "body": big}),
        ("1 MB note title", "post_note", {"kind": "observation", "title": big, "body": "x"}),
        ("1 MB skill body", "save_skill", {"name": "big-skill", "description": "a big skill", "body": big}),
        ("1 MB attempt summary", "submit_attempt", {**scene.base_submit, "summary": big}),
        ("1 MB idempotency key", "submit_attempt", {**scene.base_submit, "idempotency_key": big}),
        ("1 MB lane id", "claim_lane", {"lane_id": big}),
        ("1 MB job argument", "run_gpu_job", {"command": [scene.python, "-c", "pass", big]}),
        ("1 MB job environment value", "run_gpu_job", {"command": [scene.python, "-c", "pass"], "env": {"X": big}}),
        ("100k-element job argv", "run_gpu_job", {"command": ["true"] * 100_000}),
    ]


def replay_variants(scene: Scene) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per keyed tool: a first call and a different second call under the same key."""
    note = {"kind": "observation", "title": "replayed", "body": "first"}
    job = {"command": [scene.python, "-c", "pass"]}
    skill = {"name": "alice-replay", "description": "a skill saved twice", "body": "the first procedure " * 3}
    worker = {"agent_id": "alice", "backend": "scripted", "state": "running", "event": "started"}
    return {
        "submit_attempt": (dict(scene.base_submit), {**scene.base_submit, "summary": "other content"}),
        "post_note": (note, {**note, "body": "second"}),
        "run_gpu_job": (job, {**job, "command": [scene.python, "-c", "print(1)"]}),
        "save_skill": (skill, {**skill, "body": "another procedure " * 3}),
        "claim_lane": ({"lane_id": scene.alice_lane}, {"lane_id": scene.bob["lane_id"]}),
        "release_lane": ({"lane_id": scene.alice_lane}, {"lane_id": scene.bob["lane_id"]}),
        "record_worker": (worker, {**worker, "state": "retired"}),
    }


SUPERVISOR_ONLY = {"record_worker"}  # replayed with the supervisor's token


# --- the scene and the run -------------------------------------------------------------------------


ROLES = {"alice": "agent", "bob": "agent", "boss": "supervisor", "hugo": "human", "carol": "agent"}


def prepare(workspace: Workspace) -> tuple[dict[str, str], dict[str, Any], dict[str, Any], str]:
    """Tokens, alice's and bob's worktrees with a commit and valid predictions, alice's symlinks."""
    from tests.server.reviewer.sandbox import AgentSandbox

    tokens = {
        name: admin_call(workspace, "token_create", {"name": name, "role": role})["token"]
        for name, role in ROLES.items()
    }
    admin_call(workspace, "token_revoke", {"name": "carol"})
    payloads = {}
    for agent in ("alice", "bob"):
        box = AgentSandbox(workspace, agent)
        payloads[agent] = box.payload(box.commit(), 0, box.write_predictions(0))
    private = sorted(p for p in workspace.private_dir.rglob("*") if p.is_file())[0]
    return tokens, payloads["alice"], payloads["bob"], str(private.relative_to(workspace.root))


async def _stage(scene: Scene, bob_payload: dict[str, Any]) -> dict[str, Any]:
    """Bob's attempt, job, lane and skill; alice's lane and control calls (the base payload is valid)."""
    async with connect(scene.server.url, scene.tokens["bob"]) as bob:
        lanes = [x["lane_id"] for x in (await call(bob, "list_lanes"))["lanes"]]
        scene.bob["lane_id"] = (await call(bob, "claim_lane", {"lane_id": lanes[1]}))["lane_id"]
        scene.bob["attempt_id"] = (await call(bob, "submit_attempt", bob_payload))["attempt_id"]
        job = {"command": [scene.python, "-c", "import time; time.sleep(20)"], "time_limit_s": 60}
        scene.bob["job_id"] = (await call(bob, "run_gpu_job", job))["job_id"]
        skill = {"name": "bob-skill", "description": "bob's own procedure", "body": "bob's procedure " * 3}
        await call(bob, "save_skill", skill)
        scene.bob["skill"] = skill["name"]
        tools = (await bob.list_tools()).tools
    async with connect(scene.server.url, scene.tokens["alice"]) as alice:
        scene.alice_lane = (await call(alice, "claim_lane", {"lane_id": lanes[0]}))["lane_id"]
        control = await call(alice, "submit_attempt", scene.base_submit)
    good = await http_attack(
        scene,
        "control",
        "a raw tools/call with good headers",
        _bearer(scene, "alice"),
        rpc("post_note", {"kind": "observation", "title": "control", "body": "x"}),
    )
    return {"tools": tools, "control_attempt": control["attempt_id"], "control_http": good}


def _bearer(scene: Scene, who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {scene.tokens[who]}"}


async def _attack_all(scene: Scene, tools: list[Any]) -> tuple[list[Outcome], list[str], list[str]]:
    async with contextlib.AsyncExitStack() as stack:
        for who in ("alice", "hugo", "boss"):
            scene.clients[who] = await stack.enter_async_context(connect(scene.server.url, scene.tokens[who]))
        return await _attacks(scene, tools)


async def _attacks(scene: Scene, tools: list[Any]) -> tuple[list[Outcome], list[str], list[str]]:
    outcomes: list[Outcome] = []
    fields = path_fields(tools)
    uncovered = [f for f in fields if inject(scene, f, "x") is None]
    values = {
        **{f"traversal: {k}": ("traversal", v) for k, v in traversal_values(scene).items()},
        **{f"symlink: {k}": ("symlink", v) for k, v in SYMLINKS.items()},
    }
    for target in fields:
        for label, (cls, value) in values.items():
            injected = inject(scene, target, value)
            if injected and not (target == "run_gpu_job.cwd" and value.startswith("outputs/")):
                outcomes.append(await tool_attack(scene, cls, f"{target} <- {label}", "alice", *injected))
    for label, tool, arguments in identifier_attacks(scene):
        field_name = next(
            k
            for k in ("job_id", "review_id", "attempt_id", "lane_id", "name", "parent_attempt_id")
            if k in arguments and arguments[k] != scene.base_submit.get(k)
        )
        outcomes.append(
            await tool_attack(scene, "traversal", f"{tool}.{field_name} <- {label}", "alice", tool, arguments)
        )
    for name, who, tool, arguments in role_attacks(scene):
        outcomes.append(await tool_attack(scene, "role", name, who, tool, arguments))
    outcomes += await _http_attacks(scene)
    for name, tool, arguments in cross_agent_attacks(scene):
        outcomes.append(await tool_attack(scene, "cross_agent", name, "alice", tool, arguments))
    for name, tool, arguments in oversize_attacks(scene):
        outcomes.append(await tool_attack(scene, "oversize", name, "alice", tool, arguments))
    keyed, replays = _keyed(tools), replay_variants(scene)
    for index, tool in enumerate(sorted(keyed)):
        if tool not in replays:
            uncovered.append(f"{tool}.idempotency_key")
            continue
        first, second = replays[tool]
        key, who = f"replayed-{index}", "boss" if tool in SUPERVISOR_ONLY else "alice"
        await call(scene.clients[who], tool, {**first, "idempotency_key": key})
        outcomes.append(
            await tool_attack(
                scene, "replayed_key", f"{tool}: same key, other content", who, tool, {**second, "idempotency_key": key}
            )
        )
    return outcomes, fields, uncovered


def _keyed(tools: list[Any]) -> set[str]:
    return {t.name for t in tools if "idempotency_key" in (t.input_schema.get("properties") or {})}


async def _http_attacks(scene: Scene) -> list[Outcome]:
    port, note = scene.server.port, rpc("post_note", {"kind": "observation", "title": "from a web page", "body": "x"})
    bearer = _bearer(scene, "alice")
    headers = {
        "foreign Host": {"host": "evil.example"},
        "foreign Host with the port": {"host": f"evil.example:{port}"},
        "Host with a loopback prefix": {"host": f"127.0.0.1.evil.example:{port}"},
        "foreign Origin": {"origin": "http://evil.example"},
        "Origin with a loopback prefix": {"origin": f"http://127.0.0.1.evil.example:{port}"},
        "null Origin": {"origin": "null"},
        "https Origin on another port": {"origin": "https://localhost:1"},
    }
    found = [await http_attack(scene, "host_origin", name, {**bearer, **h}, note) for name, h in headers.items()]
    found.append(await http_attack(scene, "revoked_token", "revoked token", _bearer(scene, "carol"), note))
    found.append(await http_attack(scene, "revoked_token", "no token", {}, note))
    mallory = json.dumps({"name": "mallory", "role": "supervisor"}).encode()
    admin = {"x-amid-admin": scene.tokens["alice"]}
    route = "/admin/token_create"
    found.append(await http_attack(scene, "role", "agent token on an admin route", admin, mallory, route))
    huge = rpc("post_note", {"kind": "observation", "title": "huge body", "body": "x" * (12 * MB)})
    found.append(await http_attack(scene, "oversize", "12 MB request body", bearer, huge))
    return found


def run(workspace: Workspace) -> dict[str, Any]:
    """The whole suite on `workspace` (a fresh copy: it is changed); returns the result record."""
    tokens, alice_payload, bob_payload, private_file = prepare(workspace)
    server = Server(workspace)
    scene = Scene(workspace, server, tokens, sys.executable, base_submit=alice_payload, private_file=private_file)
    plant_symlinks(scene, workspace.worktrees_dir / "alice")
    started = time.monotonic()
    server.start()
    try:
        staged = asyncio.run(_stage(scene, bob_payload))
        outcomes, fields, uncovered = asyncio.run(_attack_all(scene, staged["tools"]))
    finally:
        exit_code = server.stop(__import__("signal").SIGINT)
    by_class: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_class.setdefault(o.cls, Counter())["refused" if o.refused else "passed"] += 1
    return {
        "seconds": round(time.monotonic() - started, 1),
        "server_exit": exit_code,
        "attacks": len(outcomes),
        "refused": sum(o.refused for o in outcomes),
        "by_class": {k: dict(v) for k, v in sorted(by_class.items())},
        "path_fields": fields,
        "uncovered": uncovered,
        "control_http": asdict(staged["control_http"]),
        "passed_through": [asdict(o) for o in outcomes if not o.refused],
        "uncoded": [f"{o.name}: {o.reply[:160]}" for o in outcomes if not o.refused and not o.coded and not o.trace],
        "echoed": [f"{o.name}: {o.reply_bytes} bytes" for o in outcomes if o.reply_bytes > ECHO_LIMIT],
        "outcomes": [{"class": o.cls, "name": o.name, "refused": o.refused, "reply": o.reply[:160]} for o in outcomes],
    }


def main() -> None:
    from benchmarks._common import demo_workspace, write_result

    workspace = demo_workspace()
    try:
        result = run(workspace)
    finally:
        shutil.rmtree(workspace.root.parent, ignore_errors=True)
    print(json.dumps({k: result[k] for k in ("attacks", "refused", "by_class", "uncovered")}, indent=1))
    for item in result["passed_through"]:
        print(f"PASSED THROUGH [{item['cls']}] {item['name']}: {item['trace'] or item['reply'][:120]}")
    print(f"wrote {write_result('attacks', result)}")


if __name__ == "__main__":
    main()
