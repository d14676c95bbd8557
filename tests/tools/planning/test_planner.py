"""The planner on real profiles of generated tasks: portfolios differ sensibly and explain themselves."""

from __future__ import annotations

import pytest

from amid.registry.loader import load_foundation_models, load_lane_templates
from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.planner import plan_portfolio
from amid.tools.planning.portfolio import LaneSpec, Portfolio
from amid.tools.planning.resources import Environment, detect_environment
from tests.tools.planning.generated_tasks import GENERATED

TEMPLATES = load_lane_templates()
MODELS = load_foundation_models()
PACKAGES = {r.name for t in TEMPLATES for r in t.resources if r.kind != "registry_model"}


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    # This machine's packages, and an empty hub cache (nothing cached, nothing downloaded).
    return detect_environment(PACKAGES, hub_cache_dir=tmp_path_factory.mktemp("empty-hub") / "hub")


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PlanningFacts]:
    root = tmp_path_factory.mktemp("generated")
    return {name: make(root / name) for name, make in GENERATED.items()}


@pytest.fixture(scope="module")
def portfolios(facts: dict[str, PlanningFacts], environment: Environment) -> dict[str, Portfolio]:
    return {name: plan_portfolio(f, TEMPLATES, MODELS, environment) for name, f in facts.items()}


def _lane(portfolio: Portfolio, lane_id: str) -> LaneSpec:
    return portfolio.lane(lane_id)


def _ids(portfolio: Portfolio) -> list[str]:
    return [lane.lane_id for lane in portfolio.lanes]


def _reason(portfolio: Portfolio, template_id: str) -> str:
    return next(idea.reason for idea in portfolio.excluded if idea.template_id == template_id)


def test_sparse_3d_ct_gets_an_nnunet_primary_lane_motivated_by_the_profile(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["sparse_ct_segmentation"]
    facts = portfolio.facts
    assert facts.holds("dims_3d") and facts.holds("sparse_foreground") and facts.holds("anisotropic")
    nnunet = _lane(portfolio, "nnunet-3d-fullres")
    assert nnunet.tier == "primary" and nnunet.scaffold == "nnunet"
    assert "dims_3d=true (spatial_dims=" in nnunet.motivation and "CT segmentation, 3-D" in nnunet.motivation
    assert {r.name: r.available for r in nnunet.resources}["nnunetv2"] is True
    assert _lane(portfolio, "monai-3d-segresnet-swinunetr").tier == "secondary"
    resample = _lane(portfolio, "preprocessing-resample-normalise")
    assert any(
        c.predicate == "anisotropic" and c.value and "spacing_ratio" in c.evidence for c in resample.data_conditions
    )
    fm = _lane(portfolio, "fm-3d-segmentation-finetune")
    assert fm.candidate_models and all("modality CT" in c.why for c in fm.candidate_models)
    assert all(c.availability == "obtainable" for c in fm.candidate_models)
    assert "rgb_stain=false" in _reason(portfolio, "pathology-encoder-head")


def test_rgb_pathology_tiles_get_pathology_encoder_lanes(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["pathology_tiles"]
    assert portfolio.facts.holds("rgb_stain") and portfolio.facts.holds("dims_2d")
    encoder = _lane(portfolio, "pathology-encoder-head")
    assert encoder.tier == "primary" and encoder.family == "foundation_model"
    by_id = {m.id: m for m in MODELS}
    candidates = [by_id[c.model_id] for c in encoder.candidate_models]
    assert candidates[0].domain == "pathology"
    assert all("pathology" in m.modalities and "feature_extraction" in m.task_families for m in candidates)
    assert {c.availability for c in encoder.candidate_models} == {"obtainable"}
    assert "rgb_stain=true (rgb_case_fraction=1" in encoder.motivation
    assert "nnunet-2d" in _ids(portfolio)
    assert "needs dims_3d=false" in _reason(portfolio, "nnunet-3d-fullres")


def test_detection_gets_detector_lanes_and_no_segmentation_baseline(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["xray_detection"]
    detection = _lane(portfolio, "detection-2d")
    assert detection.tier == "primary"
    assert {c.predicate for c in detection.data_conditions if c.required} == {"boxes", "dims_2d"}
    assert "task type detection is not one the lane serves" in _reason(portfolio, "nnunet-3d-fullres")
    assert "needs dims_3d=false" in _reason(portfolio, "detection-3d")


def test_enhancement_gets_a_paired_restoration_lane_with_the_monai_scaffold(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["ct_enhancement"]
    restoration = _lane(portfolio, "paired-enhancement-restoration")
    assert portfolio.facts.holds("paired_enhancement")
    assert restoration.tier == "primary" and restoration.scaffold == "monai"
    assert "paired_enhancement=true (aligned_pair_fraction=1" in restoration.motivation
    assert "task type enhancement" in _reason(portfolio, "nnunet-3d-fullres")


def test_classification_gets_a_classifier_and_a_radiology_encoder_probe(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["xray_classification"]
    assert _lane(portfolio, "classification-cnn-vit").tier == "primary"
    probe = _lane(portfolio, "radiology-encoder-linear-probe")
    assert "rad-dino" in [c.model_id for c in probe.candidate_models]
    imbalance = _lane(portfolio, "class-imbalance-sampling-loss")
    assert "largest_to_smallest_class=4" in imbalance.motivation


def test_instances_get_the_cell_instance_lane(portfolios: dict[str, Portfolio]) -> None:
    portfolio = portfolios["cell_instances"]
    cells = _lane(portfolio, "instance-cell-segmentation")
    assert cells.tier == "primary"
    assert {c.predicate for c in cells.data_conditions if c.required and c.value} == {"instances", "dims_2d"}
    assert "median_objects_per_case=6" in cells.motivation


def test_every_portfolio_starts_with_calibration_and_accounts_for_every_template(
    portfolios: dict[str, Portfolio],
) -> None:
    for portfolio in portfolios.values():
        assert portfolio.lanes[0].lane_id == "calibration-trivial"
        accounted = _ids(portfolio) + [idea.template_id for idea in portfolio.excluded]
        assert sorted(accounted) == sorted(t.id for t in TEMPLATES)
        assert all(idea.reason for idea in portfolio.excluded)
        for lane in portfolio.lanes:
            assert lane.motivation and "Profile: " in lane.motivation
            assert "{predicates}" not in lane.motivation and "{profile}" not in lane.motivation


def test_portfolios_of_different_task_types_differ(portfolios: dict[str, Portfolio]) -> None:
    primaries = {
        name: frozenset(lane.lane_id for lane in p.lanes if lane.tier == "primary") for name, p in portfolios.items()
    }
    assert len(set(primaries.values())) == len(primaries)


def test_missing_nnunet_downranks_its_lane_and_promotes_the_monai_baseline(
    facts: dict[str, PlanningFacts], environment: Environment
) -> None:
    without = Environment(packages={**environment.packages, "nnunetv2": None}, hub_files={})
    portfolio = plan_portfolio(facts["sparse_ct_segmentation"], TEMPLATES, MODELS, without)
    nnunet = _lane(portfolio, "nnunet-3d-fullres")
    assert nnunet.tier == "fallback" and "nnunetv2 is unavailable here: not installed" in nnunet.downranked[0]
    monai = _lane(portfolio, "monai-3d-segresnet-swinunetr")
    assert monai.tier == "primary" and "nnunet-3d-fullres" in monai.promoted[0]


def test_a_lane_whose_matching_models_are_all_gated_is_downranked_not_dropped(
    facts: dict[str, PlanningFacts], environment: Environment
) -> None:
    gated_only = [m for m in MODELS if m.access == "gated"]
    portfolio = plan_portfolio(facts["pathology_tiles"], TEMPLATES, gated_only, environment)
    encoder = _lane(portfolio, "pathology-encoder-head")
    assert encoder.tier == "fallback" and "request access" in encoder.downranked[-1]
    assert {c.availability for c in encoder.candidate_models} == {"gated"}


def test_cached_weights_come_first_among_candidates(facts: dict[str, PlanningFacts], environment: Environment) -> None:
    cached = Environment(packages=environment.packages, hub_files={"owkin/phikon-v2": frozenset({"model.safetensors"})})
    phikon_v2 = next(m for m in MODELS if m.id == "phikon-v2")
    assert "model.safetensors" in phikon_v2.files or not phikon_v2.files
    encoder = _lane(plan_portfolio(facts["pathology_tiles"], TEMPLATES, MODELS, cached), "pathology-encoder-head")
    assert encoder.candidate_models[0].model_id == "phikon-v2"
    assert encoder.candidate_models[0].availability == "cached"
