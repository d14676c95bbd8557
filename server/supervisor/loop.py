"""The supervisor's loop: every tick brings its copy of the evidence up to date (what changed since the
last read, `state.EvidenceSync`), applies the decisions
it calls for (lane states, promotion, stage changes, the final choice) and sends the heartbeats due.

It keeps nothing but that copy, and nothing on disk, so a supervisor killed at any point and started again
continues the run: each decision is idempotent on the server (a stage move names the stage it starts
from, a lane decision to the status it already has is a no-op, heartbeats are keyed by their cause,
the final choice is recorded once). Before promotion and finalization it re-audits the evidence, so
a revoked attempt is never promoted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from amid.server.supervisor import heartbeats, stages
from amid.server.supervisor.promotion import promote
from amid.server.supervisor.state import EvidenceSync, RunView, ToolCaller


class Workers(Protocol):
    """Managed workers (server/supervisor/workers/pool.py: WorkerPool); attached agents need none."""

    @property
    def agents(self) -> list[str]: ...

    def start(self) -> None: ...
    def deliver(self, agent_id: str, prompt: str, heartbeat_id: int | None = None) -> None: ...
    def poll(self) -> list[dict[str, Any]]: ...
    def stop(self) -> None: ...


@dataclass
class TickReport:
    stage: str
    heartbeats: list[str] = field(default_factory=list)
    stage_changes: list[str] = field(default_factory=list)
    lane_changes: list[str] = field(default_factory=list)
    role_changes: list[str] = field(default_factory=list)
    final_attempt_id: str | None = None
    worker_events: list[dict[str, Any]] = field(default_factory=list)
    waiting: str | None = None


class Supervisor:
    def __init__(self, call: ToolCaller, workers: Workers | None = None) -> None:
        self.call = call
        self.workers = workers
        self.evidence = EvidenceSync()  # this process's copy; a restarted supervisor reads the window again

    async def view(self) -> RunView:
        return await self.evidence.refresh(self.call)

    async def tick(self) -> TickReport:
        view = await self.view()
        report = TickReport(stage=view.stage)
        for change in stages.lane_progress(view):
            await self._lane(change, report)
        view = await self._advance(view, report)
        if view.stage == "finalization":
            view = await self._finalize(view, report)
        if report.lane_changes or report.stage_changes:
            view = await self.view()
        await self._heartbeats(view, report)
        if self.workers is not None:
            report.worker_events = self.workers.poll()
        report.stage = view.stage
        return report

    async def run(
        self,
        poll_s: float = 5.0,
        until_done: bool = True,
        max_s: float | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
    ) -> TickReport:
        """Tick every poll_s seconds until the run is done (or max_s passes)."""
        deadline = None if max_s is None else time.monotonic() + max_s
        while True:
            report = await self.tick()
            if on_tick is not None:
                on_tick(report)
            if (until_done and report.stage == "done") or (deadline is not None and time.monotonic() >= deadline):
                return report
            await anyio.sleep(poll_s)

    async def _lane(self, change: stages.LaneChange, report: TickReport) -> None:
        arguments = {"lane_id": change.lane_id, "status": change.status, "reason": change.reason}
        result = await self.call("set_lane_state", {**arguments, "evidence": change.evidence})
        if result["changed"]:
            report.lane_changes.append(f"{change.lane_id} → {change.status}: {change.reason}")

    async def _audit(self) -> dict[str, Any]:
        return await self.call("audit_evidence", {})

    async def _advance(self, view: RunView, report: TickReport) -> RunView:
        if stages.next_change(view) is None:
            return view
        await self._audit()  # revoked attempts must not be promoted or finalized
        view = await self.view()
        change = stages.next_change(view)
        if change is None:
            return view
        if change.to_stage == "exploitation":
            await self._promote(view, change, report)
        moved = await self.call("set_stage", vars(change))
        if moved["changed"]:
            report.stage_changes.append(f"{change.from_stage} → {change.to_stage}: {change.reason}")
        return await self.view()

    async def _promote(self, view: RunView, change: stages.StageChange, report: TickReport) -> None:
        promotion = promote(view)
        assert promotion is not None  # next_change only leaves exploration with evidence to promote
        evidence = {
            "ranking": [
                {
                    "lane_id": lane.lane_id,
                    "attempt_id": lane.best.attempt_id,
                    "score": lane.score,
                    "score_se": lane.spread,
                    "tries": lane.best.tries,
                    "bound": lane.bound,
                }
                for lane in promotion.ranking
            ]
        }
        for lane_change in stages.waivers(view, change.reason):
            await self._lane(lane_change, report)
        await self._lane(stages.LaneChange(promotion.promoted.lane_id, "promoted", promotion.reason, evidence), report)
        if promotion.challenger is not None:
            challenger = stages.LaneChange(promotion.challenger.lane_id, "challenger", promotion.reason, evidence)
            await self._lane(challenger, report)

    async def _finalize(self, view: RunView, report: TickReport) -> RunView:
        audit = await self._audit()
        view = await self.view()
        candidates = [a for lane in view.lanes_with("promoted", "challenger") if (a := view.best(lane))]
        if not candidates:
            report.waiting = "finalization: no accepted, real, holdout-gated attempt on a promoted lane"
            return view
        best = view.ranked(candidates)[0]  # the one ranking: bound widened for tries
        reason = (
            f"best accepted real holdout-gated attempt of the promoted lanes: {best.attempt_id} on {best.lane_id}, "
            f"verified {view.evidence.metric}={best.verified_score:.4g} (bound {view.bound(best):.4g} after "
            f"{best.tries} tries); audit {audit['audit_id']} revoked "
            f"{len(audit['revoked'])}"
        )
        chosen = await self.call(
            "choose_final", {"attempt_id": best.attempt_id, "reason": reason, "audit_id": audit["audit_id"]}
        )
        report.final_attempt_id = chosen["attempt_id"]
        done = {"from_stage": "finalization", "to_stage": "done", "reason": f"final attempt {chosen['attempt_id']}"}
        if (await self.call("set_stage", done))["changed"]:
            report.stage_changes.append(f"finalization → done: {done['reason']}")
        return await self.view()

    async def _assign(self, role: heartbeats.RoleAssignment, report: TickReport) -> None:
        """Record an agent's role (a repeat of its current one is a no-op on the server)."""
        assigned = await self.call("assign_role", vars(role))
        if assigned["created"]:
            report.role_changes.append(f"{role.agent_id} → {role.role} ({role.lane_id or 'no lane'})")

    async def _heartbeats(self, view: RunView, report: TickReport) -> None:
        beats = heartbeats.due(view)
        for beat in beats:  # first: a stage heartbeat names the role it assigns
            if beat.role is not None:
                await self._assign(beat.role, report)
        for role in heartbeats.roles_due(view):
            if view.role(role.agent_id) != (role.stage, role.role, role.lane_id):
                await self._assign(role, report)
        managed = set(self.workers.agents) if self.workers is not None else set()
        for beat in beats:
            arguments = {"agent_id": beat.agent_id, "kind": beat.kind, "prompt": beat.prompt}
            sent = await self.call("send_heartbeat", {**arguments, "cause_key": beat.cause_key})
            if not sent["created"]:
                continue
            report.heartbeats.append(f"{beat.agent_id} {beat.cause_key}")
            if beat.agent_id in managed and self.workers is not None:
                # With its id: the launch records it as given, so a supervisor killed right here gives it
                # at its next start (the pool reads the undelivered ones back), and never twice.
                self.workers.deliver(beat.agent_id, beat.prompt, sent["heartbeat_id"])
