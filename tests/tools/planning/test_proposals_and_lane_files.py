"""Agent proposals are completed by the planner; lane files carry every docs/ARCHITECTURE.md §8 field."""

from __future__ import annotations

import pytest

from amid.registry.loader import load_foundation_models, load_lane_templates
from amid.server.errors import InvalidInput
from amid.tools.planning.facts import ChannelIntensity, PlanningFacts
from amid.tools.planning.planner import plan_portfolio
from amid.tools.planning.proposals import LaneProposal, complete_proposal, lane_id_for
from amid.tools.planning.render import lane_markdown, portfolio_markdown
from amid.tools.planning.resources import Environment
from amid.tools.planning.steps import monai_config_for, scaffold_steps

TEMPLATES = load_lane_templates()
MODELS = load_foundation_models()
INSTALLED = Environment(packages={"nnunetv2": "2.8.1", "monai": "1.6.1", "torch": "2.8", "numpy": "2", "scipy": "1"})


def ct_facts() -> PlanningFacts:
    return PlanningFacts(
        task_type="segmentation",
        modality="CT",
        dims=3,
        predicates={"dims_3d": True, "anisotropic": True, "sparse_foreground": True, "few_cases": True},
        evidence={"anisotropic": {"spacing_ratio": 5.0, "threshold": 3.0}, "dims_3d": {"spatial_dims": "{'3': 20}"}},
        n_train_cases=20,
        median_shape=[64, 64, 20],
        median_spacing=[0.8, 0.8, 4.0],
        label_values={0: "background", 1: "liver", 2: "lesion"},
        median_foreground_ratio=0.004,
        intensity=[ChannelIntensity(name="CT", mean=100, std=20, percentile_00_5=30, percentile_99_5=170)],
    )


def test_a_proposal_starts_downranked_and_inherits_its_base_lane() -> None:
    proposal = LaneProposal(
        title="Lesion cascade on the liver crop",
        family="task_specific",
        hypothesis="A second model on the liver bounding box segments small lesions better.",
        predicates=["sparse_foreground", "small_structures"],
        base_template="nnunet-3d-fullres",
    )
    lane = complete_proposal(
        proposal, "w1", ct_facts(), TEMPLATES, MODELS, INSTALLED, {"agent-lesion-cascade-on-the-liver-crop"}
    )
    assert lane.lane_id == "agent-lesion-cascade-on-the-liver-crop-2"
    assert (lane.tier, lane.origin, lane.proposed_by, lane.template_id) == (
        "fallback",
        "agent",
        "w1",
        "nnunet-3d-fullres",
    )
    assert lane.downranked[0].startswith("agent-proposed lanes start downranked")
    assert "claimed condition does not hold: small_structures=false" in lane.downranked[1]
    assert lane.scaffold == "nnunet" and lane.resources[0].name == "nnunetv2" and lane.resources[0].available
    assert any("SPLIT_LEAK" in o for o in lane.validation_obligations)
    assert "sparse_foreground=true" in lane.motivation


def test_a_proposal_naming_an_unknown_base_lane_is_refused_with_the_known_ones() -> None:
    proposal = LaneProposal(title="x lane", family="baseline", hypothesis="something testable", base_template="nope")
    with pytest.raises(
        InvalidInput, match="base_template: got 'nope'; expected one of the lane templates: calibration"
    ):
        complete_proposal(proposal, "w1", ct_facts(), TEMPLATES, MODELS, INSTALLED, set())


def test_lane_ids_of_proposals_are_slugs() -> None:
    assert lane_id_for("  SAM-Med3D + TTA!! ", set()) == "agent-sam-med3d-tta"


def test_a_lane_file_holds_every_lane_field_and_the_exact_scaffold_commands() -> None:
    facts = ct_facts()
    portfolio = plan_portfolio(
        facts,
        TEMPLATES,
        MODELS,
        INSTALLED,
        lambda lane, f: scaffold_steps(lane, f, python="/venv/bin/python", k_folds=3, task_id="demo-ct"),
    )
    text = lane_markdown(portfolio.lane("nnunet-3d-fullres"))
    for heading in (
        "## Hypothesis",
        "## Why these data",
        "## Resources",
        "## Implementation plan",
        "## Preprocessing assumptions",
        "## Validation obligations",
        "## Budget estimate",
        "## Expected artifacts",
        "## Failure modes",
    ):
        assert heading in text, heading
    assert "tier **primary**" in text and "| dims_3d | holds | True |" in text
    plan = "/venv/bin/nnUNetv2_plan_and_preprocess -d 501 -c 3d_fullres -np 4 -npfp 4 --verify_dataset_integrity"
    assert plan in text
    assert "/venv/bin/nnUNetv2_train 501 3d_fullres 2 --npz" in text and "3d_fullres 3 --npz" not in text
    assert "-m amid.tools.scaffolds.nnunet to-task --out .amid-local/nnunet --split val --fold 0" in text
    overview = portfolio_markdown(portfolio)
    assert "## Not instantiated (kept with the reason)" in overview
    assert "**pathology-encoder-head**" in overview and "needs rgb_stain=false" in overview


def test_monai_lanes_get_a_profile_chosen_configuration() -> None:
    facts = ct_facts()
    portfolio = plan_portfolio(facts, TEMPLATES, MODELS, INSTALLED)
    config = monai_config_for(portfolio.lane("monai-3d-segresnet-swinunetr"), facts)
    assert config is not None
    assert '"network": "SegResNet"' in config and '"loss": "DiceFocal"' in config
    assert monai_config_for(portfolio.lane("nnunet-3d-fullres"), facts) is None
