"""Readable lane files (memory/lanes/<lane_id>.md) and the portfolio overview (memory/lanes/PORTFOLIO.md)."""

from __future__ import annotations

import json
import shlex

from amid.tools.planning.portfolio import ExcludedIdea, LaneSpec, Portfolio, ScaffoldStep

PORTFOLIO_FILE = "PORTFOLIO.md"


def lane_markdown(lane: LaneSpec) -> str:
    """Every field of the lane, in the order a worker reads it before starting."""
    origin = f"proposed by {lane.proposed_by}" if lane.origin == "agent" else f"template {lane.template_id}"
    lines = [
        f"# Lane {lane.lane_id}: {lane.title}",
        "",
        f"family **{lane.family}** · tier **{lane.tier}** · rank {lane.rank:g} · {origin}",
        "",
        "## Hypothesis",
        lane.hypothesis,
        "",
        "## Why these data (motivation)",
        lane.motivation,
        *_tier_notes(lane),
    ]
    if lane.data_conditions:
        lines += ["", "| predicate | needed | value | evidence |", "|---|---|---|---|"]
        for c in lane.data_conditions:
            evidence = ", ".join(f"{k}={v}" for k, v in c.evidence.items())
            lines.append(f"| {c.predicate} | {'holds' if c.required else 'must not hold'} | {c.value} | {evidence} |")
    lines += _resources(lane) + _candidates(lane)
    lines += _section("Implementation plan", lane.implementation_plan, numbered=True)
    lines += _steps(lane)
    lines += _section("Preprocessing assumptions", lane.preprocessing_assumptions)
    lines += _section("Validation obligations (the reviewer checks these)", lane.validation_obligations)
    budget = lane.budget_estimate
    lines += ["", "## Budget estimate", f"{budget.gpu_hours:g} GPU hours, {budget.wall_hours:g} wall-clock hours"]
    lines += _section("Expected artifacts", lane.expected_artifacts)
    lines += _section("Failure modes to watch", lane.failure_modes)
    return "\n".join(lines) + "\n"


def _tier_notes(lane: LaneSpec) -> list[str]:
    notes = [f"- downranked: {reason}" for reason in lane.downranked]
    notes += [f"- {reason}" for reason in lane.promoted]
    return ["", *notes] if notes else []


def _section(title: str, items: list[str], *, numbered: bool = False) -> list[str]:
    if not items:
        return []
    bullets = [f"{i}. {item}" if numbered else f"- {item}" for i, item in enumerate(items, 1)]
    return ["", f"## {title}", *bullets]


def _resources(lane: LaneSpec) -> list[str]:
    if not lane.resources:
        return []
    rows = [
        f"| {r.kind} | {r.name} | {'yes' if r.required else 'no'} | {'yes' if r.available else 'NO'} | {r.detail} |"
        for r in lane.resources
    ]
    return ["", "## Resources", "| kind | name | required | available here | detail |", "|---|---|---|---|---|", *rows]


def _candidates(lane: LaneSpec) -> list[str]:
    if not lane.candidate_models:
        return []
    lines = ["", "## Candidate foundation models (query_fm_registry for details)"]
    for c in lane.candidate_models:
        hub = f", hub {c.hub_id}" if c.hub_id else ""
        lines.append(f"- **{c.model_id}** ({c.name}): {c.availability}, {c.access}, licence {c.licence}{hub}")
        lines.append(f"  input: {c.input_spec}")
    return lines


STEPS_INTRO = (
    "claim_lane returns these steps as data: pass a step's `run_gpu_job` to run_gpu_job as it is (argv, env, "
    "gpus, cpus, time_limit_s; cwd = your worktree). Route: run the steps marked always, plus those of one "
    "route in order: smoke (minutes, fold 0: proves the mechanics and makes a model every later step accepts) "
    "or full (the real training of every fold)."
)


def _steps(lane: LaneSpec) -> list[str]:
    if lane.scaffold is None:
        return []
    if not lane.scaffold_steps:
        return ["", "## Scaffold", f"The {lane.scaffold} scaffold does not cover these data; write the entry point."]
    lines = ["", f"## Scaffold ({lane.scaffold}): its steps, fitted to this machine", STEPS_INTRO]
    for step in lane.scaffold_steps:
        lines += _step(step)
    return lines


def _step(step: ScaffoldStep) -> list[str]:
    """A step for a human: what it asks of run_gpu_job, its note, and its command as shell text."""
    if not step.job:
        head = f"- **{step.name}** (inference_command, as JSON for submit_attempt): {step.note}"
        return [head, "  ```json", "  " + json.dumps(step.argv), "  ```"]
    asks = f"route {step.route}; gpus={step.gpus}, cpus={step.cpus}, time_limit_s={step.time_limit_s}"
    if step.gpu_only:
        asks += f"; needs a GPU this machine lacks: {step.gpu_only}"
    lines = [f"- **{step.name}** ({asks}){': ' + step.note if step.note else ''}", "  ```sh"]
    if step.env:
        lines.append("  env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in step.env.items()) + " \\")
    lines.append("  " + shlex.join(step.argv))
    return [*lines, "  ```"]


def portfolio_markdown(portfolio: Portfolio, extra_lanes: list[LaneSpec] | None = None) -> str:
    """All lanes by tier, and every idea left out with its reason."""
    facts = portfolio.facts
    lines = [
        "# Lane portfolio",
        "",
        f"Planned from the data profile {facts.profile_fingerprint[:12]}: {facts.summary()}.",
    ]
    lines += ["", "Predicates: " + ", ".join(f"{k}={'true' if v else 'false'}" for k, v in facts.predicates.items())]
    lines += ["", "| lane | tier | family | rank | notes |", "|---|---|---|---|---|"]
    for lane in [*portfolio.lanes, *(extra_lanes or [])]:
        notes = "; ".join(lane.downranked + lane.promoted) or "-"
        lines.append(f"| [{lane.lane_id}]({lane.lane_id}.md) | {lane.tier} | {lane.family} | {lane.rank:g} | {notes} |")
    lines += ["", "## Not instantiated (kept with the reason)"]
    lines += [_excluded_line(idea) for idea in portfolio.excluded] or ["- none"]
    return "\n".join(lines) + "\n"


def _excluded_line(idea: ExcludedIdea) -> str:
    return f"- **{idea.template_id}** ({idea.title}): {idea.reason}"
