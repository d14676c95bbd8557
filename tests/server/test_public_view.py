"""Nothing an agent can read leads outside the public view: no file under task/ or memory/, no
link there, and no output of get_task, profile_data or list_lanes names the folder the task was
imported from, the workspace's private/ folder, or a held-out case. The import folder still holds
every holdout label and answer; a contract that named it (`source.origin`) let a memorising
checkpoint score 1.000 on the holdout."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.errors import InvalidInput
from amid.server.holdout_split import with_holdout_fraction
from amid.server.ledger import Ledger
from amid.server.settings import Settings
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.contract import SourceRef, write_contract
from amid.tools.task.importers import import_task
from tests.clients import local_client, ok
from tests.fixtures.rexmle import make_challenge

pytestmark = pytest.mark.anyio
SKILLS = Path(__file__).resolve().parents[2] / "skills"
TEXT = (".yaml", ".yml", ".md", ".txt", ".json", ".csv", ".tsv")


def readable_by_agents(ws: Workspace) -> dict[str, bytes]:
    """name → bytes of everything under task/ and memory/: each file (decompressed when gzip), each
    link's target, and each path's own name."""
    found: dict[str, bytes] = {}
    for root in (ws.task_dir, ws.memory_dir):
        for path in sorted(root.rglob("*")):
            rel = str(path.relative_to(ws.root))
            found[f"name:{rel}"] = rel.encode()
            if path.is_symlink():
                found[f"link:{rel}"] = os.readlink(path).encode()
            elif path.is_file():
                data = path.read_bytes()
                found[rel] = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return found


async def tool_outputs(ws: Workspace) -> dict[str, bytes]:
    ledger = Ledger(ws.ledger_path)
    services = Services(settings=Settings(workspace=ws.root, port=0), workspace=ws, ledger=ledger)
    try:
        async with local_client(services, "reader") as client:
            outputs = {
                "get_task": await ok(client, "get_task", {}),
                "profile_data": await ok(client, "profile_data", {"wait_s": 55}),
                "list_lanes": await ok(client, "list_lanes", {}),
            }
    finally:
        ledger.close()
    assert outputs["profile_data"]["status"] == "ready"
    return {f"tool:{name}": json.dumps(value).encode() for name, value in outputs.items()}


def leaks(found: dict[str, bytes], paths: list[str], held_ids: set[str]) -> list[tuple[str, str]]:
    token = re.compile(
        rb"(?<![0-9A-Za-z])(" + b"|".join(re.escape(i.encode()) for i in held_ids) + rb")(?![0-9A-Za-z])"
    )
    hits = [(name, p) for name, data in found.items() for p in paths if p.encode() in data]
    for name, data in found.items():
        textual = name.startswith(("name:", "link:", "tool:")) or name.endswith(TEXT)
        if held_ids and textual and not _seeded_skill(name, data):
            hits += [(name, m.decode()) for m in token.findall(data)]
    return hits


def _seeded_skill(name: str, data: bytes) -> bool:
    """The product's own skills, byte for byte: their example ids (`p001s0`) are the same text in
    every run, written before any split, so they cannot tell an agent which cases are held out."""
    rel = name.removeprefix("memory/skills/")
    return rel != name and (SKILLS / rel).is_file() and (SKILLS / rel).read_bytes() == data


def secrets_of(ws: Workspace, *folders: Path) -> list[str]:
    paths = {str(ws.private_dir), str(ws.private_dir.resolve())}
    for folder in folders:
        paths |= {str(folder), str(folder.resolve())}
    return sorted(paths)


def held_out_ids(ws: Workspace) -> set[str]:
    cases = json.loads((ws.private_dir / "holdout.json").read_text(encoding="utf-8"))["cases"]
    return {c["case_id"] for c in cases} | {c["group"] for c in cases if c.get("group")}


@pytest.mark.parametrize("link", [False, True], ids=["copied", "linked"])
async def test_a_demo_workspace_with_a_holdout_shows_agents_no_origin_private_path_or_held_out_case(
    demo_challenge: Path, tmp_path: Path, link: bool
) -> None:
    imported = import_task(demo_challenge)
    imported.contract = with_holdout_fraction(imported.contract, 0.2)
    ws = init_workspace(imported, tmp_path / "ws", link_data=link)
    outputs = await tool_outputs(ws)  # first: list_lanes writes the lane files, profile_data its report
    found = {**readable_by_agents(ws), **outputs}

    held = held_out_ids(ws)
    assert len(held) == 6  # four scans of two patients
    assert leaks(found, secrets_of(ws, demo_challenge), held) == []
    assert not [name for name in found if name.startswith("link:")]
    assert any(name.startswith("name:memory/lanes/") for name in found)  # the lane files were scanned
    # the origin stays with the server, for humans
    assert list(ws.origin()) == ["task"] and ws.origin()["task"].startswith(str(demo_challenge.resolve()))
    ledger = Ledger(ws.ledger_path)
    try:
        assert ledger.activity.get_state("task_origin") == ws.origin()
    finally:
        ledger.close()


async def test_a_rexmle_import_shows_agents_neither_the_challenge_nor_the_data_folder(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path / "bench", "topcow-track1-task1")
    ws = init_workspace(import_task(folder, data_dir=data_dir), tmp_path / "ws", link_data=True)
    outputs = await tool_outputs(ws)  # first: list_lanes writes the lane files, profile_data its report
    found = {**readable_by_agents(ws), **outputs}

    assert leaks(found, secrets_of(ws, folder, data_dir, tmp_path / "bench"), set()) == []
    assert "origin" not in (ws.task_dir / "contract.yaml").read_text(encoding="utf-8")
    assert ws.origin()["task"] == str(folder.resolve())
    assert ws.origin()["data"].startswith(str(data_dir.resolve()))


def test_a_task_whose_description_names_its_import_folder_is_refused(demo_challenge: Path, tmp_path: Path) -> None:
    imported = import_task(demo_challenge)
    imported.description = f"Labels for the test set are in {demo_challenge.resolve()}/private.\n"
    with pytest.raises(InvalidInput, match=r"description\.md names .*remove the path"):
        init_workspace(imported, tmp_path / "ws")
    assert not (tmp_path / "ws").exists()


def test_amid_status_still_says_where_the_task_came_from(demo_challenge: Path, tmp_path: Path) -> None:
    ws = init_workspace(import_task(demo_challenge), tmp_path / "ws")
    command = [sys.executable, "-m", "amid", "status", "-w", str(ws.root)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"imported  task {ws.origin()['task']}" in result.stdout


def test_a_workspace_made_before_the_origin_left_the_contract_still_reads_it(workspace: Workspace) -> None:
    workspace.source_file.unlink()
    legacy = workspace.contract().model_copy(update={"source": SourceRef(format="native", origin="/old/task.yaml")})
    write_contract(legacy, workspace.task_dir / "contract.yaml")
    assert workspace.origin() == {"task": "/old/task.yaml"}
