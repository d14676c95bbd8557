"""Re-audit: accepted attempts whose frozen files changed or vanished, or whose stored commit is
gone, become `revoked` (off the leaderboard and the lane scores, visible in the views), and
`request_review` reviews an attempt again once its evidence changed since its verdict.

Attempts are honest and accepted by the real reviewer first, then tampered with on disk as an
agent (or a failing disk) could, then audited with the same function `amid audit` calls.
"""

from __future__ import annotations

from typing import Any

import git
import pytest

from amid.server.context import Services
from amid.server.ledger import utcnow
from amid.server.ledger.lanes import LaneRow
from amid.server.reviewer.audit import audit
from tests.server.reviewer.sandbox import AgentSandbox, call, call_error, client_for, submit_and_review, verdict

pytestmark = pytest.mark.anyio
LANE = "audit-lane"


async def accepted(services: Services, agent: str, fold: int, seed: int, **overrides: Any) -> dict[str, Any]:
    box = AgentSandbox(services.workspace, agent)
    sha = box.commit({"notes.txt": f"{agent} {seed}\n"})  # a commit of its own
    async with client_for(services, agent) as client:
        review = await submit_and_review(client, box.model_payload(sha, fold, seed=seed, **overrides))
    assert review["verdict"] == "accepted", review["failed_checks"]
    return review


def frozen(services: Services, attempt_id: str, role: str) -> Any:
    row = next(a for a in services.ledger.attempts.artifacts(attempt_id) if a["role"] == role)
    return services.workspace.root / row["frozen_path"]


def rewrite(path: Any) -> None:
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-4] + b"XXXX")


def drop_stored_commit(services: Services, attempt_id: str) -> None:
    with git.Repo(services.workspace.commit_store) as store:
        store.git.update_ref("-d", f"refs/amid/attempts/{attempt_id}")
        store.git.gc("--prune=now", "--quiet")


async def test_audit_revokes_what_changed_and_takes_it_off_the_leaderboard_and_lane_scores(
    review_services: Services,
) -> None:
    ledger = review_services.ledger
    ledger.lanes.add(
        [
            LaneRow(
                lane_id=LANE,
                title="audit",
                family="baseline",
                tier="primary",
                origin="planner",
                rank=1.0,
                lane_file=f"memory/lanes/{LANE}.md",
                spec={},
            )
        ],
        utcnow(),
    )
    reviews = [await accepted(review_services, f"audited-{i}", i, 40 + i, lane_id=LANE) for i in range(4)]
    changed, missing, uncommitted, intact = (r["attempt_id"] for r in reviews)
    rewrite(frozen(review_services, changed, "predictions"))
    frozen(review_services, missing, "checkpoint").unlink()
    drop_stored_commit(review_services, uncommitted)

    report = audit(ledger, review_services.workspace)

    by_id = {a.attempt_id: a for a in report.attempts}
    assert by_id[changed].failed == ["ARTIFACT_CHANGED"] and by_id[changed].revoked
    assert by_id[missing].failed == ["ARTIFACT_MISSING"] and by_id[missing].revoked
    assert by_id[uncommitted].failed == ["COMMIT_UNKNOWN"] and by_id[uncommitted].revoked
    assert by_id[intact].failed == [] and not by_id[intact].revoked
    assert by_id[intact].n_files == len(ledger.attempts.artifacts(intact)) == 4 + 3  # 4 predictions
    views = {r["attempt_id"]: r for r in ledger.db.fetchall("SELECT * FROM v_attempts")}
    assert (views[changed]["status"], views[changed]["revoked_codes"]) == ("revoked", "ARTIFACT_CHANGED")
    assert (views[intact]["status"], views[intact]["revoked_codes"]) == ("accepted", None)
    evidence = ledger.audits.revocations(changed)[0]["evidence"]["files"][0]
    assert evidence["role"] == "predictions" and evidence["expected_sha256"] != evidence["actual_sha256"]
    board = {r["attempt_id"] for r in ledger.reviews.leaderboard(True, LANE, 50)}
    assert board == {intact}
    lane = next(lane for lane in ledger.lanes.summaries(utcnow(), 3600, True) if lane["lane_id"] == LANE)
    intact_dice = next(m["verified"] for m in reviews[3]["metrics"] if m["metric"] == "dice")
    assert lane["n_accepted"] == 1 and lane["best_verified"] == pytest.approx(intact_dice)
    assert ledger.db.scalar("SELECT n_revoked FROM v_lane_summary WHERE lane_id = ?", [LANE]) == 3
    again = audit(ledger, review_services.workspace)
    assert intact in {a.attempt_id for a in again.attempts} and changed not in {a.attempt_id for a in again.attempts}


async def test_request_review_on_a_revoked_attempt_reviews_it_again_and_rejects_it(review_services: Services) -> None:
    first = await accepted(review_services, "revoked-again", 0, 51)
    attempt_id = first["attempt_id"]
    rewrite(frozen(review_services, attempt_id, "checkpoint"))
    assert attempt_id in {a.attempt_id for a in audit(review_services.ledger, review_services.workspace).attempts}
    assert review_services.ledger.attempts.get(attempt_id)["status"] == "revoked"
    async with client_for(review_services, "revoked-again") as client:
        refused = await call_error(client, "withdraw_attempt", {"attempt_id": attempt_id})
        assert refused.startswith(f"CONFLICT: attempt_id: attempt {attempt_id!r} is revoked")  # stays visible
        queued = await call(client, "request_review", {"attempt_id": attempt_id})
        review = await verdict(client, queued["review_id"])

    assert queued["review_id"] != first["review_id"]
    assert review["verdict"] == "rejected" and review["attempt_status"] == "rejected"
    assert "ARTIFACT_CHANGED" in {c["code"] for c in review["failed_checks"]}


async def test_request_review_keeps_a_verdict_whose_evidence_stands_and_redoes_one_whose_evidence_changed(
    review_services: Services,
) -> None:
    first = await accepted(review_services, "changed-later", 1, 52)
    attempt_id = first["attempt_id"]
    async with client_for(review_services, "changed-later") as client:
        same = await call(client, "request_review", {"attempt_id": attempt_id})
        assert (same["review_id"], same["status"]) == (first["review_id"], "done")
        frozen(review_services, attempt_id, "logs").unlink()
        queued = await call(client, "request_review", {"attempt_id": attempt_id})
        review = await verdict(client, queued["review_id"])
        repeat = await call(client, "request_review", {"attempt_id": attempt_id})

    assert queued["review_id"] != first["review_id"] and review["verdict"] == "rejected"
    assert "ARTIFACT_MISSING" in {c["code"] for c in review["failed_checks"]}
    assert repeat["review_id"] == queued["review_id"]  # unchanged since that verdict: no third review


async def test_identical_checkpoints_are_owned_per_attempt_so_one_agent_cannot_revoke_another(
    review_services: Services,
) -> None:
    """Five agents submit byte-identical checkpoints ({"mark": 61}); each then acts on its own copy.
    With one shared `artifacts/<sha256>` the deleter's `rm` revoked every other attempt."""
    ledger, ws = review_services.ledger, review_services.workspace
    names = ("keeper", "deleter", "tamperer", "cleaner")
    reviews = {name: await accepted(review_services, f"own-{name}", fold, 61) for fold, name in enumerate(names)}
    ids = {name: str(r["attempt_id"]) for name, r in reviews.items()}
    box = AgentSandbox(ws, "own-withdrawer")
    async with client_for(review_services, "own-withdrawer") as client:
        pending = await call(client, "submit_attempt", box.model_payload(box.commit(), 0, seed=61))
        await call(client, "withdraw_attempt", {"attempt_id": pending["attempt_id"]})
    copies = {name: frozen(review_services, i, "checkpoint") for name, i in {**ids, "w": pending["attempt_id"]}.items()}
    assert len({p.read_bytes() for p in copies.values()}) == 1 and len(set(copies.values())) == 5

    copies["w"].unlink()  # a withdrawn attempt's files: its agent's to delete
    copies["deleter"].unlink()
    rewrite(copies["tamperer"])
    cleaner_worktree = ws.worktrees_dir / "own-cleaner" / "outputs/model-61.json"
    cleaner_worktree.unlink()  # its worktree copy: the frozen one is the evidence
    report = audit(ledger, ws)

    by_id = {a.attempt_id: a for a in report.attempts}
    assert by_id[ids["deleter"]].failed == ["ARTIFACT_MISSING"] and by_id[ids["deleter"]].revoked
    assert by_id[ids["tamperer"]].failed == ["ARTIFACT_CHANGED"] and by_id[ids["tamperer"]].revoked
    for name in ("keeper", "cleaner"):
        assert (by_id[ids[name]].failed, by_id[ids[name]].revoked) == ([], False), name
        assert ledger.attempts.get(ids[name])["status"] == "accepted"
    async with client_for(review_services, "own-keeper") as client:
        same = await call(client, "request_review", {"attempt_id": ids["keeper"]})
    assert (same["review_id"], same["status"]) == (reviews["keeper"]["review_id"], "done")  # its verdict stands
