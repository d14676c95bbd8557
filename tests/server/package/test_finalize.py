"""`amid finalize` and the builder: refusals with coded errors, idempotence, --force, a failed build
that leaves the old package whole, the choice recorded through choose_final, and the server route."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.errors import Conflict, NotFound
from amid.server.ledger import Ledger
from amid.server.package.builder import build, read_manifest
from amid.server.package.evidence import best_eligible
from amid.server.package.finalize import finalize
from amid.server.ranking import bound
from amid.server.workspace import Workspace
from tests.server.package.conftest import amid


@pytest.fixture
def ledger(run_copy: Workspace) -> Iterator[Ledger]:
    opened = Ledger(run_copy.ledger_path)
    yield opened
    opened.close()


def final_attempt(ledger: Ledger) -> str:
    choice = ledger.supervision.final_choice()
    assert choice is not None
    return str(choice["attempt_id"])


def other_accepted(ledger: Ledger) -> dict:
    """An accepted attempt that is not the final one, its lane made a challenger (so it may be final)."""
    row = ledger.db.fetchone(
        "SELECT * FROM v_evidence WHERE status = 'accepted' AND attempt_id <> ? ORDER BY attempt_id",
        [final_attempt(ledger)],
    )
    assert row is not None, "the demo accepts attempts on two lanes"
    ledger.supervision.decide_lane(row["lane_id"], "challenger", "test: a second finalist", {}, "test")
    return row


def manifest_sha(workspace: Workspace) -> str:
    return hashlib.sha256((workspace.sub("package") / "manifest.json").read_bytes()).hexdigest()


def leftovers(workspace: Workspace) -> list[str]:
    return sorted(p.name for p in workspace.root.iterdir() if p.name.startswith(".package-"))


def verified(workspace: Workspace) -> int:
    """verify-package's exit code, with the run's public key as the trusted key."""
    key = workspace.control_dir / "package-signing.pub"
    return amid("verify-package", str(workspace.sub("package")), "--public-key", str(key)).exit_code


def test_the_builder_refuses_an_unknown_attempt(run_copy: Workspace, ledger: Ledger) -> None:
    with pytest.raises(NotFound) as caught:
        build(ledger, run_copy, "att-99999", by="test")
    assert caught.value.code == "NOT_FOUND" and caught.value.field == "attempt_id"
    assert "att-99999" in caught.value.message


def test_the_builder_refuses_an_attempt_that_is_not_accepted(run_copy: Workspace, ledger: Ledger) -> None:
    rejected = ledger.db.fetchone("SELECT attempt_id FROM attempts WHERE status = 'rejected' ORDER BY attempt_id")
    assert rejected is not None
    before = manifest_sha(run_copy)
    with pytest.raises(Conflict) as caught:
        build(ledger, run_copy, rejected["attempt_id"], by="test", force=True)
    assert caught.value.code == "CONFLICT" and "not accepted" in caught.value.message
    assert manifest_sha(run_copy) == before and leftovers(run_copy) == []


def test_the_builder_refuses_an_accepted_attempt_of_a_lane_that_was_not_promoted(
    run_copy: Workspace, ledger: Ledger
) -> None:
    # The demo keeps both accepted lanes (promoted and challenger): an accepted attempt's lane is retired here.
    row = ledger.db.fetchone(
        "SELECT attempt_id, lane_id FROM v_evidence WHERE status = 'accepted' AND attempt_id <> ?",
        [final_attempt(ledger)],
    )
    assert row is not None, "the demo accepts attempts on two lanes"
    ledger.supervision.decide_lane(row["lane_id"], "retired", "test: no longer a finalist", {}, "test")
    with pytest.raises(Conflict, match="is not promoted or challenger"):
        build(ledger, run_copy, row["attempt_id"], by="test")


def test_a_second_finalize_of_the_same_attempt_keeps_the_package(run_copy: Workspace, ledger: Ledger) -> None:
    before = manifest_sha(run_copy)
    result = finalize(ledger, run_copy)
    assert result["attempt_id"] == final_attempt(ledger) and result["built"] is False
    assert result["manifest_sha256"] == before == manifest_sha(run_copy)
    assert len(ledger.db.fetchall("SELECT * FROM v_packages")) == 1


def test_another_attempt_is_refused_without_force_and_the_package_stays(run_copy: Workspace, ledger: Ledger) -> None:
    other = other_accepted(ledger)
    before = manifest_sha(run_copy)
    with pytest.raises(Conflict, match="pass --force"):
        finalize(ledger, run_copy, other["attempt_id"])
    assert manifest_sha(run_copy) == before and final_attempt(ledger) != other["attempt_id"]


def test_a_build_that_fails_leaves_the_old_package_whole(run_copy: Workspace, ledger: Ledger) -> None:
    other = other_accepted(ledger)
    frozen = next(a for a in ledger.attempts.artifacts(other["attempt_id"]) if a["role"] == "checkpoint")
    (run_copy.root / frozen["frozen_path"]).unlink()
    before = manifest_sha(run_copy)
    with pytest.raises(Conflict, match="ARTIFACT_MISSING"):
        finalize(ledger, run_copy, other["attempt_id"], force=True)
    assert manifest_sha(run_copy) == before and leftovers(run_copy) == []
    assert final_attempt(ledger) != other["attempt_id"]
    assert verified(run_copy) == 0


def test_force_replaces_the_final_choice_and_the_package(run_copy: Workspace, ledger: Ledger) -> None:
    first = final_attempt(ledger)
    other = other_accepted(ledger)
    result = finalize(ledger, run_copy, other["attempt_id"], force=True)
    assert result["replaced"] and result["built"] and result["attempt_id"] == other["attempt_id"]
    choice = ledger.supervision.final_choice()
    assert choice is not None and choice["attempt_id"] == other["attempt_id"]
    assert choice["package_sha256"] == manifest_sha(run_copy) == result["manifest_sha256"]
    manifest = read_manifest(run_copy.sub("package"))
    assert manifest is not None and manifest["attempt_id"] == other["attempt_id"]
    replaced = ledger.activity.events(kind="final_choice_replaced")
    assert len(replaced) == 1 and first in replaced[0]["payload"]
    assert leftovers(run_copy) == []
    assert verified(run_copy) == 0


def test_finalize_without_a_supervisor_choice_records_it_through_choose_final(
    run_copy: Workspace, ledger: Ledger
) -> None:
    chosen = final_attempt(ledger)
    ledger.db.execute("DELETE FROM final_choices")  # a run whose supervisor never finalized
    result = finalize(ledger, run_copy)
    choice = ledger.supervision.final_choice()
    assert choice is not None and choice["attempt_id"] == chosen == result["attempt_id"]
    assert choice["decided_by"] == "amid-finalize" and choice["package_path"] == "package"
    assert "best verified dice" in choice["reason"]


def test_the_best_eligible_attempt_follows_the_metric_direction(run_copy: Workspace, ledger: Ledger) -> None:
    other = other_accepted(ledger)
    rows = ledger.db.fetchall(
        "SELECT attempt_id, verified_score, score_se, tries FROM v_evidence WHERE attempt_id IN (?, ?)",
        [final_attempt(ledger), other["attempt_id"]],
    )

    def pessimistic(higher: bool) -> dict[str, float]:
        return {r["attempt_id"]: bound(r["verified_score"], r["score_se"], r["tries"], higher) for r in rows}

    high = pessimistic(True)
    assert best_eligible(ledger) == max(high, key=lambda a: high[a])
    ledger.activity.set_state("primary_direction", "lower_better")
    low = pessimistic(False)  # lower is better: the bound moves up by the spread, and the smallest wins
    assert best_eligible(ledger) == min(low, key=lambda a: low[a])
    assert all(low[r["attempt_id"]] >= r["verified_score"] for r in rows)


def test_finalize_and_verify_go_through_the_running_server(run_copy: Workspace) -> None:
    process, _ = start_server(run_copy.root)
    try:
        base = [sys.executable, "-m", "amid"]
        kept = subprocess.run(
            [*base, "finalize", "-w", str(run_copy.root)], capture_output=True, text=True, timeout=120
        )
        checked = subprocess.run(
            [*base, "verify-package", str(run_copy.sub("package")), "-w", str(run_copy.root)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop_server(process)
    assert kept.returncode == 0, kept.stderr
    assert "package kept (already built)" in kept.stdout
    printed = re.search(r"signed with the run's Ed25519 key (sha256:[0-9a-f]{64})", kept.stdout)
    assert printed is not None, kept.stdout
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "all checks passed, signed by the trusted key" in checked.stdout
    offline = amid("verify-package", str(run_copy.sub("package")), "--public-key", printed.group(1))
    assert offline.exit_code == 0, offline.output


def test_finalize_names_the_problem_when_nothing_can_be_final(run_copy: Workspace, ledger: Ledger) -> None:
    ledger.db.execute("DELETE FROM final_choices")
    for lane in ledger.db.fetchall("SELECT lane_id FROM lanes WHERE status IN ('promoted', 'challenger')"):
        ledger.supervision.decide_lane(lane["lane_id"], "retired", "test: nothing promoted", {}, "test")
    with pytest.raises(Conflict, match="no attempt can be final"):
        finalize(ledger, run_copy)
    assert Path(run_copy.sub("package") / "manifest.json").is_file()


def test_a_missing_review_file_is_packaged_from_the_ledger_and_marked(run_copy: Workspace, ledger: Ledger) -> None:
    review_id = ledger.db.scalar("SELECT review_id FROM v_evidence WHERE attempt_id = ?", [final_attempt(ledger)])
    (run_copy.root / "reviews" / f"{review_id}.json").unlink()
    assert finalize(ledger, run_copy, force=True)["built"]
    review = json.loads((run_copy.sub("package") / "review.json").read_text(encoding="utf-8"))
    assert review["source"].startswith("ledger:") and review["verdict"] == "accepted"
    assert any(c["code"] == "HOLDOUT_GAP" for c in review["checks"])
    assert verified(run_copy) == 0
