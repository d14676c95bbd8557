"""submit_attempt and withdraw_attempt through the real in-memory MCP client: confinement of every
path to the caller's worktree, frozen content-addressed evidence, validation, idempotency."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.ledger.attempts import Attempts, NewAttempt
from tests.server.reviewer.sandbox import AgentSandbox, call, call_error, client_for, marked

pytestmark = pytest.mark.anyio


def _counts(services: Services) -> tuple[int, int, int]:
    db = services.ledger.db
    return tuple(int(db.scalar(f"SELECT count(*) FROM {t}")) for t in ("attempts", "artifacts", "metrics"))  # type: ignore[return-value]


async def test_submission_freezes_every_file_read_only_and_records_declared_scores(services: Services) -> None:
    box = AgentSandbox(services.workspace, "freezer")
    sha = box.commit()
    payload = box.payload(sha, 0, box.write_predictions(0, marked(1)), summary="baseline", budget_class="smoke")
    async with client_for(services, "freezer") as client:
        attempt = await call(client, "submit_attempt", payload)
    assert attempt["status"] == "pending" and attempt["commit"] == sha and attempt["warnings"] == []
    rows = services.ledger.attempts.artifacts(attempt["attempt_id"])
    assert {r["role"] for r in rows} == {"predictions", "logs", "checkpoint", "training_manifest"}
    assert attempt["n_files"] == len(rows) == 4 + 3
    for row in rows:
        frozen = services.workspace.root / row["frozen_path"]
        assert frozen.name == row["sha256"] and frozen.stat().st_mode & 0o222 == 0
        assert frozen.read_bytes() == (box.worktree / row["declared_path"]).read_bytes()
    assert services.ledger.attempts.scores(attempt["attempt_id"], "agent") == {0: payload["declared_scores"]["0"]}
    manifest = json.loads(
        (services.workspace.root / "artifacts/manifests" / f"{attempt['attempt_id']}.json").read_text(encoding="utf-8")
    )
    assert manifest["commit"] == sha and len(manifest["files"]) == len(rows)
    pinned = services.workspace.repo_dir / ".git/refs/amid/attempts" / attempt["attempt_id"]
    assert pinned.read_text(encoding="utf-8").strip() == sha


@pytest.mark.parametrize(
    ("make_path", "code"),
    [
        (lambda box, ws: "../../private/answers.csv", "FORBIDDEN"),
        (lambda box, ws: "outputs/../../other", "FORBIDDEN"),
        (lambda box, ws: str(ws.task_dir / "public/train/labels"), "FORBIDDEN"),
        (lambda box, ws: _symlink(box, "outputs/to-private", ws.private_dir / "labels"), "FORBIDDEN"),
        (lambda box, ws: _symlink(box, "outputs/answers.csv", ws.private_dir / "answers.csv"), "FORBIDDEN"),
        (lambda box, ws: _inside_private_folder(box), "FORBIDDEN"),
        (lambda box, ws: "outputs/does-not-exist", "INVALID_INPUT"),
    ],
    ids=["dotdot-private", "dotdot-escape", "absolute-outside", "symlink-dir", "symlink-file", "private-dir", "absent"],
)
async def test_paths_escaping_the_worktree_are_refused_and_nothing_is_recorded(
    services: Services, make_path: object, code: str
) -> None:
    box = AgentSandbox(services.workspace, "escaper")
    sha = box.commit()
    payload = box.payload(sha, 0, box.write_predictions(0, marked(2)))
    payload["artifacts"]["logs"] = [make_path(box, services.workspace)]  # type: ignore[operator]
    before = _counts(services)
    frozen_before = set(os.listdir(services.workspace.sub("artifacts")))
    async with client_for(services, "escaper") as client:
        message = await call_error(client, "submit_attempt", payload)
    assert message.startswith(f"{code}: artifacts.logs.0")
    assert _counts(services) == before
    assert set(os.listdir(services.workspace.sub("artifacts"))) == frozen_before  # paths are checked before copying


def _frozen_folders(services: Services) -> set[str]:
    return {p.name for p in (services.workspace.sub("artifacts") / "frozen").iterdir()}


def _owned_folders(services: Services, attempt_id: str) -> set[str]:
    return {Path(r["frozen_path"]).parent.name for r in services.ledger.attempts.artifacts(attempt_id)}


async def test_identical_files_of_two_attempts_are_two_copies_each_in_its_attempts_own_folder(
    services: Services,
) -> None:
    first, second = AgentSandbox(services.workspace, "twin-a"), AgentSandbox(services.workspace, "twin-b")
    payloads = [box.payload(box.commit(), 0, box.write_predictions(0, marked(7))) for box in (first, second)]
    async with client_for(services, "twin-a") as a, client_for(services, "twin-b") as b:
        ids = [
            (await call(client, "submit_attempt", p))["attempt_id"] for client, p in zip((a, b), payloads, strict=True)
        ]
    rows = [{r["sha256"]: r["frozen_path"] for r in services.ledger.attempts.artifacts(i)} for i in ids]
    shared = set(rows[0]) & set(rows[1])
    assert shared  # the same predictions, byte for byte
    assert all(rows[0][sha] != rows[1][sha] for sha in shared)
    assert len(_owned_folders(services, ids[0])) == len(_owned_folders(services, ids[1])) == 1
    assert _owned_folders(services, ids[0]) != _owned_folders(services, ids[1])
    manifest = json.loads((services.workspace.root / f"artifacts/manifests/{ids[1]}.json").read_text(encoding="utf-8"))
    assert {f["frozen_path"] for f in manifest["files"]} == set(rows[1].values())


def _symlink(box: AgentSandbox, rel: str, target: Path) -> str:
    box.path(rel).symlink_to(target)
    return rel


def _inside_private_folder(box: AgentSandbox) -> str:
    return box.write_text("private/notes.txt", "copied answers", encoding="utf-8")


async def test_unknown_commit_bad_folds_and_bad_scores_name_the_field(services: Services) -> None:
    box = AgentSandbox(services.workspace, "careless")
    sha = box.commit()
    good = box.payload(sha, 1, box.write_predictions(1, marked(3)))
    cases = {
        "NOT_FOUND: commit": {**good, "commit": "0123456789abcdef0123456789abcdef01234567"},
        "INVALID_INPUT: folds": {**good, "folds": [7]},
        "INVALID_INPUT: declared_scores.1": {**good, "declared_scores": {"1": {"accuracy": 0.5}}},
        "INVALID_INPUT: declared_scores:": {**good, "declared_scores": {"0": good["declared_scores"]["1"]}},
        "INVALID_INPUT: parent_attempt_id": {**good, "claims_improvement": ["dice"]},
        "NOT_FOUND: parent_attempt_id": {**good, "parent_attempt_id": "att-99999"},
        "NOT_FOUND: lane_id": {**good, "lane_id": "no-such-lane"},
        "INVALID_INPUT: budget_class": {**good, "budget_class": "x" * 40},
        "INVALID_INPUT: inference_command": {**good, "inference_command": ["python", ""]},
    }
    before = _counts(services)
    async with client_for(services, "careless") as client:
        for prefix, payload in cases.items():
            assert (await call_error(client, "submit_attempt", payload)).startswith(prefix), prefix
    assert _counts(services) == before


async def test_idempotency_key_returns_the_first_attempt(services: Services) -> None:
    box = AgentSandbox(services.workspace, "retrier")
    payload = box.payload(box.commit(), 2, box.write_predictions(2, marked(4)), idempotency_key="try-1")
    async with client_for(services, "retrier") as client:
        first = await call(client, "submit_attempt", payload)
        again = await call(client, "submit_attempt", payload)
    assert again["attempt_id"] == first["attempt_id"] and _counts(services)[0] == 1
    assert _frozen_folders(services) == _owned_folders(services, first["attempt_id"])  # the retry's copy is gone


async def test_a_reused_idempotency_key_with_other_content_is_a_conflict_naming_the_key(services: Services) -> None:
    box = AgentSandbox(services.workspace, "reuser")
    sha = box.commit()
    payload = box.payload(sha, 1, box.write_predictions(1, marked(6)), idempotency_key="run-7")
    other_scores = {"1": {**payload["declared_scores"]["1"], "dice": 0.123}}
    other_commit = box.commit({"train.py": "print('later')\n"})
    async with client_for(services, "reuser") as client:
        first = await call(client, "submit_attempt", payload)
        scores = await call_error(client, "submit_attempt", {**payload, "declared_scores": other_scores})
        commit = await call_error(client, "submit_attempt", {**payload, "commit": other_commit})
        (box.worktree / payload["artifacts"]["checkpoint"]).write_bytes(b"retrained")
        files = await call_error(client, "submit_attempt", payload)

    assert scores.startswith("CONFLICT: idempotency_key: 'run-7' was used for attempt " + first["attempt_id"])
    assert "different declared_scores;" in scores
    assert "different commit;" in commit and "different artifacts;" in files
    assert _counts(services)[0] == 1
    assert _frozen_folders(services) == _owned_folders(services, first["attempt_id"])  # refused: nothing kept


async def test_withdraw_is_for_the_owner_and_not_for_accepted_attempts(services: Services) -> None:
    box = AgentSandbox(services.workspace, "owner")
    AgentSandbox(services.workspace, "other")
    payload = box.payload(box.commit(), 3, box.write_predictions(3, marked(5)))
    async with client_for(services, "owner") as owner, client_for(services, "other") as other:
        attempt = await call(owner, "submit_attempt", payload)
        refused = await call_error(other, "withdraw_attempt", {"attempt_id": attempt["attempt_id"]})
        assert refused.startswith("FORBIDDEN: attempt_id")
        done = await call(owner, "withdraw_attempt", {"attempt_id": attempt["attempt_id"]})
        assert done["status"] == "withdrawn"
        again = await call_error(owner, "request_review", {"attempt_id": attempt["attempt_id"]})
        assert again.startswith("CONFLICT: attempt_id")


def test_a_failure_inside_the_transaction_leaves_nothing_behind(services: Services) -> None:
    attempts: Attempts = services.ledger.attempts
    new = NewAttempt(
        agent_id="x",
        lane_id=None,
        commit_sha="abc",
        folds=[0],
        budget_class=None,
        parent_attempt_id=None,
        inference_command=None,
        idempotency_key=None,
        summary=None,
        declared={0: {"dice": 0.5}},
    )

    def explode(attempt_id: str) -> str:
        raise OSError("disk full while writing the manifest")

    with pytest.raises(OSError):
        attempts.create(new, on_created=explode)
    assert _counts(services) == (0, 0, 0)
