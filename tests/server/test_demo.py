"""`amid demo` end to end, as the README's first command runs it: server, supervisor process and three
scripted workers; a cheat rejected for the right reason, a promotion with its reason, finalization."""

from __future__ import annotations

from amid.server.ledger import Ledger
from amid.server.workspace import Workspace
from tests.conftest import DemoRun


def test_amid_demo_runs_three_workers_a_rejection_a_promotion_and_finalization(demo_run: DemoRun) -> None:
    for shown in ("attempts", "stages", "promotion", "final", "PRED_NOT_REPRODUCED", "roles", "workers"):
        assert shown in demo_run.stdout, shown
    # the package the supervisor's finalization built verifies, and the report page is written
    assert "all checks passed" in demo_run.stdout
    assert (demo_run.workspace / "report.html").stat().st_size > 10_000
    workspace = Workspace.open(demo_run.workspace)
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        board = ledger.db.fetchall("SELECT agent_id, verified_score FROM v_leaderboard ORDER BY agent_id")
        cheat = ledger.db.fetchall("SELECT status, failed_codes FROM v_evidence WHERE agent_id = 'worker-3'")
        stages = ledger.db.fetchall("SELECT from_stage, to_stage FROM v_stage_transitions ORDER BY transition_id")
        promoted = ledger.db.fetchall("SELECT lane_id, reason FROM v_lane_decisions WHERE to_status = 'promoted'")
        final = ledger.db.fetchall("SELECT attempt_id, lane_id FROM v_final_choice")
        package = ledger.db.scalar("SELECT package_path FROM v_final_choice")
        best = ledger.db.fetchall(
            "SELECT attempt_id FROM v_leaderboard WHERE lane_id = ? ORDER BY verified_score DESC LIMIT 1",
            [promoted[0]["lane_id"]] if promoted else [""],
        )
        beats = ledger.db.fetchall("SELECT agent_id, cause_key FROM heartbeats WHERE cause_key IS NOT NULL")
        kinds = {r["kind"] for r in ledger.db.fetchall("SELECT DISTINCT kind FROM heartbeats")}
        focus = ledger.db.scalar("SELECT count(DISTINCT agent_id) FROM notes WHERE kind = 'focus'")
        roles = ledger.db.fetchall("SELECT agent_id, stage, role FROM v_agent_roles ORDER BY assignment_id")
        workers = ledger.db.fetchall("SELECT agent_id, backend, state FROM workers ORDER BY agent_id")
        delivered = ledger.db.fetchall(
            "SELECT agent_id, count(*) AS n FROM worker_transitions WHERE event = 'delivered' GROUP BY ALL"
        )
        trouble = ledger.db.fetchall(  # what a worker that fell silent last said (the message of a failure here)
            "SELECT agent_id, event, detail FROM worker_transitions WHERE event IN ('exited', 'paused', 'stalled')"
        )
    finally:
        ledger.close()
    assert [r["agent_id"] for r in board] == ["worker-1", "worker-2"]
    assert all(r["verified_score"] > 0.3 for r in board)
    assert cheat[0]["status"] == "rejected" and "PRED_NOT_REPRODUCED" in cheat[0]["failed_codes"]
    assert [(r["from_stage"], r["to_stage"]) for r in stages] == [
        ("exploration", "exploitation"),
        ("exploitation", "finalization"),
        ("finalization", "done"),
    ]
    assert len(promoted) == 1 and "over lane" in promoted[0]["reason"]
    assert package == "package"
    assert final == [{"attempt_id": best[0]["attempt_id"], "lane_id": promoted[0]["lane_id"]}]
    assert len(beats) == len({(b["agent_id"], b["cause_key"]) for b in beats})
    assert kinds == {"reflection", "consolidation", "plateau", "stage"} and focus == 3, trouble
    # the three workers were managed by the supervisor process, and resumed with heartbeat prompts
    assert [(w["agent_id"], w["backend"], w["state"]) for w in workers] == [
        (f"worker-{i}", "scripted", "retired") for i in (1, 2, 3)
    ]
    assert {d["agent_id"] for d in delivered} == {"worker-1", "worker-2", "worker-3"}
    # exploitation roles are ledger rows: the promoted lane's worker optimizes, everyone finalizes
    optimizer = next(r["agent_id"] for r in roles if r["role"] == "optimizer")
    assert ledger_lane_of(workspace, optimizer) == promoted[0]["lane_id"]
    assert {(r["agent_id"], r["role"]) for r in roles if r["stage"] == "finalization"} == {
        (f"worker-{i}", "finalizer") for i in (1, 2, 3)
    }


def ledger_lane_of(workspace: Workspace, agent_id: str) -> str:
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        return str(ledger.db.scalar("SELECT lane_id FROM attempts WHERE agent_id = ? LIMIT 1", [agent_id]))
    finally:
        ledger.close()
