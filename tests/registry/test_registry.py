"""Contract tests for the shipped registry data: it parses, it is big enough, it is consistent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import pytest

from amid.registry.loader import load_foundation_models, load_lane_templates
from amid.registry.schemas import FmQuery, FoundationModel, Predicate
from amid.server.errors import DataUnreadable

MODELS = load_foundation_models()
TEMPLATES = load_lane_templates()


def _matches(model: FoundationModel, query: FmQuery) -> bool:
    pairs: list[tuple[Sequence[str], Sequence[str]]] = [
        (query.modalities, model.modalities),
        (query.task_families, model.task_families),
        (query.dimensionality, model.dimensionality),
        (query.domains, [model.domain]),
    ]
    return all(not wanted or bool(set(wanted) & set(have)) for wanted, have in pairs)


def test_registry_ships_at_least_forty_foundation_models() -> None:
    assert len(MODELS) >= 40


def test_registry_ships_at_least_twelve_lane_templates() -> None:
    assert len(TEMPLATES) >= 12


def test_foundation_model_ids_are_unique() -> None:
    ids = [model.id for model in MODELS]
    assert len(ids) == len(set(ids))


def test_lane_template_ids_are_unique() -> None:
    ids = [template.id for template in TEMPLATES]
    assert len(ids) == len(set(ids))


def test_every_template_predicate_is_a_known_predicate() -> None:
    known = set(get_args(Predicate))
    used = {p for t in TEMPLATES for p in [*t.applies_when, *t.excluded_when]}
    assert used <= known
    assert used, "templates should condition on at least some predicates"


def test_every_registry_model_resource_names_a_registry_entry() -> None:
    ids = {model.id for model in MODELS}
    named = {r.name for t in TEMPLATES for r in t.resources if r.kind == "registry_model"}
    assert named <= ids, sorted(named - ids)


def test_every_fm_query_selects_at_least_two_registry_models() -> None:
    for template in TEMPLATES:
        if template.fm_query is not None:
            selected = [m.id for m in MODELS if _matches(m, template.fm_query)]
            assert len(selected) >= 2, (template.id, selected)


def test_gated_models_name_the_hub_repository_that_gates_them() -> None:
    assert all(model.hub_id for model in MODELS if model.access == "gated")


def test_every_model_cites_the_public_page_it_was_checked_against() -> None:
    assert all(model.source.startswith("https://") for model in MODELS)


def test_templates_cover_the_lane_families_and_task_types_the_planner_needs() -> None:
    families = {t.family for t in TEMPLATES}
    task_types = {tt for t in TEMPLATES for tt in t.task_types}
    scaffolds = {t.scaffold for t in TEMPLATES}
    assert families >= {
        "calibration",
        "baseline",
        "foundation_model",
        "task_specific",
        "preprocessing",
        "postprocessing",
        "ensemble",
    }
    assert task_types >= {
        "segmentation",
        "instance_segmentation",
        "detection",
        "classification",
        "regression",
        "enhancement",
    }
    assert scaffolds >= {"nnunet", "monai"}


def test_registry_covers_the_main_imaging_domains() -> None:
    domains = {model.domain for model in MODELS}
    assert domains >= {"radiology", "pathology", "cell-microscopy", "ophthalmology"}


def test_bad_entry_fails_naming_the_file_the_entry_and_the_field(tmp_path: Path) -> None:
    good = _shipped_entry_text("phikon-v2")
    (tmp_path / "broken.yaml").write_text(good.replace("access: open", "access: sometimes"), encoding="utf-8")
    with pytest.raises(DataUnreadable) as caught:
        load_foundation_models(tmp_path)
    message = str(caught.value)
    assert "broken.yaml" in message
    assert "'phikon-v2'" in message
    assert "'access'" in message
    assert caught.value.field == "access"


def test_unknown_field_in_an_entry_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "extra.yaml").write_text(_shipped_entry_text("phikon-v2") + "favourite: true\n", encoding="utf-8")
    with pytest.raises(DataUnreadable, match="favourite"):
        load_foundation_models(tmp_path)


def test_duplicate_ids_across_files_are_rejected(tmp_path: Path) -> None:
    entry = _shipped_entry_text("phikon-v2")
    (tmp_path / "a.yaml").write_text(entry, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(entry, encoding="utf-8")
    with pytest.raises(DataUnreadable, match="more than once"):
        load_foundation_models(tmp_path)


def test_template_applying_and_excluding_the_same_predicate_is_rejected(tmp_path: Path) -> None:
    import yaml

    template = next(t for t in TEMPLATES if t.id == "nnunet-3d-fullres")
    raw = template.model_dump(mode="json")
    raw["excluded_when"] = ["dims_3d"]
    (tmp_path / "lane.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(DataUnreadable, match="dims_3d"):
        load_lane_templates(tmp_path)


def _shipped_entry_text(model_id: str) -> str:
    import yaml

    model = next(m for m in MODELS if m.id == model_id)
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False)
