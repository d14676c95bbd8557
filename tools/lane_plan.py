"""The run's lane portfolio: planned once from the data profile, kept in the ledger and in memory/lanes/.

The first lane tool call of a run plans the portfolio: it takes the data profile (from the
`profile_provider` the composition root registers in `Services`, by default profile_data's
cached profile, computed if stale), the lane templates, the foundation-model registry and what this machine
has installed, and writes one readable lane file per lane plus PORTFOLIO.md with every idea left
out and why. The facts it planned from stay in the run state, so agent proposals are completed
against the same profile.
"""

from __future__ import annotations

from collections.abc import Callable

from amid.registry.loader import load_foundation_models, load_lane_templates
from amid.server.context import Services, ToolContext
from amid.server.ledger import utcnow
from amid.server.ledger.lanes import LaneRow
from amid.tools import lane_steps
from amid.tools.planning.facts import PlanningFacts, facts_from_profile
from amid.tools.planning.planner import plan_portfolio
from amid.tools.planning.portfolio import ExcludedIdea, LaneSpec, Portfolio
from amid.tools.planning.proposals import LaneProposal, complete_proposal
from amid.tools.planning.render import PORTFOLIO_FILE, lane_markdown, portfolio_markdown
from amid.tools.planning.resources import Environment, detect_environment
from amid.tools.planning.steps import monai_config_for, monai_config_name
from amid.tools.profile_data import provide_profile
from amid.tools.profiling import CompactProfile, DataProfile

STATE_KEY = "lane_portfolio"
CORE_PACKAGES = ("nnunetv2", "monai", "torch")

ProfileProvider = Callable[[Services], DataProfile | CompactProfile]


def ensure_portfolio(ctx: ToolContext) -> None:
    """Plan the portfolio unless the run has one; concurrent first calls plan once."""
    if ctx.ledger.activity.get_state(STATE_KEY) is not None:
        return
    with ctx.services.plan_lock:
        if ctx.ledger.activity.get_state(STATE_KEY) is not None:
            return
        portfolio = plan(ctx)
        write_lane_files(ctx, portfolio.lanes, portfolio)
        ctx.ledger.lanes.add([_row(ctx, lane) for lane in portfolio.lanes], utcnow())
        state = {
            "planned_at": utcnow().isoformat(),
            "facts": portfolio.facts.model_dump(mode="json"),
            "excluded": [idea.model_dump() for idea in portfolio.excluded],
        }
        ctx.ledger.activity.set_state(STATE_KEY, state)
        ctx.ledger.activity.log(
            "lanes_planned",
            agent_id=ctx.caller.agent_id,
            payload={"lanes": [lane.lane_id for lane in portfolio.lanes], "excluded": len(portfolio.excluded)},
        )


def plan(ctx: ToolContext) -> Portfolio:
    """A fresh portfolio from the profile, the registry and this machine (writes nothing)."""
    contract = ctx.contract
    facts = facts_from_profile(
        _profile(ctx.services),
        contract.modality,
        anatomy=contract.anatomy,
        label_values=dict(contract.layout.label_values),
        channels=list(contract.layout.channels),
    )
    templates = load_lane_templates()
    packages = {r.name for t in templates for r in t.resources if r.kind != "registry_model"} | set(CORE_PACKAGES)
    environment = detect_environment(packages)
    return plan_portfolio(facts, templates, load_foundation_models(), environment, lane_steps.builder(ctx))


def _profile(services: Services) -> DataProfile | CompactProfile:
    provider: ProfileProvider = services.profile_provider or provide_profile
    return provider(services)


def planned_facts(ctx: ToolContext) -> PlanningFacts:
    ensure_portfolio(ctx)
    return PlanningFacts.model_validate(ctx.ledger.activity.get_state(STATE_KEY)["facts"])


def excluded_ideas(ctx: ToolContext) -> list[ExcludedIdea]:
    state = ctx.ledger.activity.get_state(STATE_KEY) or {}
    return [ExcludedIdea.model_validate(idea) for idea in state.get("excluded", [])]


def add_proposal(ctx: ToolContext, proposal: LaneProposal) -> LaneSpec:
    """Complete an agent's proposal into a downranked lane, write its file and record it."""
    facts = planned_facts(ctx)
    lane = complete_proposal(
        proposal,
        ctx.caller.agent_id,
        facts,
        load_lane_templates(),
        load_foundation_models(),
        _environment_for(proposal),
        ctx.ledger.lanes.ids(),
    )
    write_lane_files(ctx, [lane], None)
    ctx.ledger.lanes.add([_row(ctx, lane)], utcnow())
    _rewrite_overview(ctx, facts)
    return lane


def _environment_for(proposal: LaneProposal) -> Environment:
    templates = {t.id: t for t in load_lane_templates()}
    base = templates.get(proposal.base_template or "")
    names = set(proposal.packages) | {r.name for r in (base.resources if base else []) if r.kind != "registry_model"}
    return detect_environment(names)


def write_lane_files(ctx: ToolContext, lanes: list[LaneSpec], portfolio: Portfolio | None) -> None:
    folder = ctx.workspace.memory_dir / "lanes"
    folder.mkdir(parents=True, exist_ok=True)
    facts = portfolio.facts if portfolio else planned_facts(ctx)
    for lane in lanes:
        (folder / f"{lane.lane_id}.md").write_text(lane_markdown(lane), encoding="utf-8")
        config = monai_config_for(lane, facts)
        if config is not None:
            (folder / monai_config_name(lane.lane_id)).write_text(config, encoding="utf-8")
    if portfolio is not None:
        (folder / PORTFOLIO_FILE).write_text(portfolio_markdown(portfolio), encoding="utf-8")


def _rewrite_overview(ctx: ToolContext, facts: PlanningFacts) -> None:
    planned = [LaneSpec.model_validate(spec) for spec in ctx.ledger.lanes.specs("planner")]
    proposed = [LaneSpec.model_validate(spec) for spec in ctx.ledger.lanes.specs("agent")]
    portfolio = Portfolio(facts=facts, lanes=planned, excluded=excluded_ideas(ctx))
    (ctx.workspace.memory_dir / "lanes" / PORTFOLIO_FILE).write_text(
        portfolio_markdown(portfolio, proposed), encoding="utf-8"
    )


def lane_file(ctx: ToolContext, lane_id: str) -> str:
    return ctx.workspace.relative(ctx.workspace.memory_dir / "lanes" / f"{lane_id}.md")


def _row(ctx: ToolContext, lane: LaneSpec) -> LaneRow:
    return LaneRow(
        lane_id=lane.lane_id,
        title=lane.title,
        family=lane.family,
        tier=lane.tier,
        origin=lane.origin,
        rank=lane.rank,
        lane_file=lane_file(ctx, lane.lane_id),
        spec=lane.model_dump(mode="json", exclude={"scaffold_steps"}),  # no host paths in the ledger
        template_id=lane.template_id,
        proposed_by=lane.proposed_by,
    )
