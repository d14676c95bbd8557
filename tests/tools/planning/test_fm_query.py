"""query_models: filters, ranked keyword search, and availability from a real-layout hub cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from amid.registry.loader import load_foundation_models
from amid.tools.planning import query_models
from amid.tools.planning.fm_query import tokenize

MODELS = load_foundation_models()
PATHOLOGY_ENCODERS = {m.id for m in MODELS if m.domain == "pathology" and "feature_extraction" in m.task_families}


@pytest.fixture
def empty_cache(tmp_path: Path) -> Path:
    # A directory that does not exist: the scan must treat it as "nothing cached".
    return tmp_path / "no-hub-cache"


def _fake_hub_cache(root: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """Lay out a Hugging Face hub cache exactly as huggingface_hub writes it."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo_dir = root / f"models--{repo_id.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit, encoding="utf-8")
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo_dir / "blobs").mkdir()
    for name, content in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(Path("../" * (len(Path(name).parts) + 1)) / "blobs" / blob.name)
    return root


@pytest.mark.parametrize(
    ("keywords", "expected_first"),
    [
        ("pathology foundation encoder", PATHOLOGY_ENCODERS),
        ("promptable 3D CT segmentation", {"sam-med3d", "vista3d"}),
        ("chest x-ray encoder", {"rad-dino"}),
        ("retina fundus", {"retfound-cfp"}),
        ("cell instance segmentation", {"cellpose-sam", "cellpose-cyto3"}),
        ("whole body CT organs", {"totalsegmentator"}),
        ("3D CT lung nodule detection", {"monai-lung-nodule-ct-detection"}),
        ("brain tumour MRI segmentation", {"monai-brats-mri-segmentation"}),
        ("chest x-ray report generation", {"chexagent"}),
        ("self-configuring segmentation baseline", {"nnunet"}),
        ("box prompt 2d lesion segmentation", {"medsam"}),
        ("text prompt universal segmentation", {"sat", "biomedparse"}),
    ],
)
def test_realistic_query_returns_the_expected_model_first(
    keywords: str, expected_first: set[str], empty_cache: Path
) -> None:
    hits = query_models(MODELS, keywords=keywords, hub_cache_dir=empty_cache)
    assert hits, keywords
    assert hits[0].model.id in expected_first, [h.model.id for h in hits[:5]]
    assert hits[0].why[-1].startswith("keywords: ")


def test_filters_keep_only_models_matching_every_filter(empty_cache: Path) -> None:
    hits = query_models(
        MODELS,
        modality="pathology",
        task_family="feature_extraction",
        access="open",
        limit=100,
        hub_cache_dir=empty_cache,
    )
    assert hits
    for hit in hits:
        assert "pathology" in hit.model.modalities
        assert "feature_extraction" in hit.model.task_families
        assert hit.model.access == "open"
        assert hit.why == ["modality=pathology", "task_family=feature_extraction", "access=open"]
    assert {"phikon-v2", "midnight"} <= {hit.model.id for hit in hits}
    assert "uni" not in {hit.model.id for hit in hits}


def test_dimensionality_filter_excludes_models_of_the_other_dimensionality(empty_cache: Path) -> None:
    hits = query_models(MODELS, dimensionality="3d", limit=100, hub_cache_dir=empty_cache)
    assert hits
    assert all("3d" in hit.model.dimensionality for hit in hits)
    assert "rad-dino" not in {hit.model.id for hit in hits}


def test_licence_filter_matches_a_case_insensitive_substring(empty_cache: Path) -> None:
    hits = query_models(MODELS, licence="apache", limit=100, hub_cache_dir=empty_cache)
    assert hits
    assert all("apache" in hit.model.licence.lower() for hit in hits)
    assert "uni" not in {hit.model.id for hit in hits}


def test_without_keywords_results_keep_registry_order(empty_cache: Path) -> None:
    hits = query_models(MODELS, modality="fundus", limit=100, hub_cache_dir=empty_cache)
    registry_order = [m.id for m in MODELS if "fundus" in m.modalities]
    assert [hit.model.id for hit in hits] == registry_order
    assert all(hit.score == 0 for hit in hits)


def test_keywords_matching_nothing_return_no_hits(empty_cache: Path) -> None:
    assert query_models(MODELS, keywords="quantum blockchain", hub_cache_dir=empty_cache) == []


def test_limit_caps_the_number_of_hits(empty_cache: Path) -> None:
    assert len(query_models(MODELS, keywords="segmentation", limit=3, hub_cache_dir=empty_cache)) == 3


def test_scores_are_sorted_best_first(empty_cache: Path) -> None:
    hits = query_models(MODELS, keywords="ct segmentation", limit=20, hub_cache_dir=empty_cache)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_model_with_weights_in_the_hub_cache_is_cached(tmp_path: Path) -> None:
    cache = _fake_hub_cache(
        tmp_path / "hub", "owkin/phikon-v2", {"config.json": b"{}", "model.safetensors": b"weights"}
    )
    hits = query_models(MODELS, keywords="phikon-v2", hub_cache_dir=cache)
    hit = next(h for h in hits if h.model.id == "phikon-v2")
    assert hit.availability == "cached"


def test_gated_model_present_in_the_cache_is_cached_not_gated(tmp_path: Path) -> None:
    cache = _fake_hub_cache(tmp_path / "hub", "MahmoodLab/UNI", {"pytorch_model.bin": b"weights"})
    hit = next(h for h in query_models(MODELS, keywords="uni", hub_cache_dir=cache) if h.model.id == "uni")
    assert hit.availability == "cached"


def test_cached_config_without_weight_files_is_not_cached(tmp_path: Path) -> None:
    cache = _fake_hub_cache(tmp_path / "hub", "owkin/phikon-v2", {"config.json": b"{}"})
    hit = next(h for h in query_models(MODELS, keywords="phikon-v2", hub_cache_dir=cache) if h.model.id == "phikon-v2")
    assert hit.availability == "obtainable"


def test_weights_in_a_subfolder_of_the_snapshot_count_as_cached(tmp_path: Path) -> None:
    cache = _fake_hub_cache(tmp_path / "hub", "MONAI/vista3d", {"models/model.pt": b"weights"})
    hit = next(h for h in query_models(MODELS, keywords="vista3d", hub_cache_dir=cache) if h.model.id == "vista3d")
    assert hit.availability == "cached"


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("uni", "gated"),
        ("phikon-v2", "obtainable"),
        ("nnunet", "obtainable"),
        ("models-genesis", "unknown_offline"),
    ],
)
def test_availability_without_a_cache_follows_access(model_id: str, expected: str, empty_cache: Path) -> None:
    model = next(m for m in MODELS if m.id == model_id)
    hits = query_models([model], hub_cache_dir=empty_cache)
    assert [hit.availability for hit in hits] == [expected]


def test_tokenizer_joins_xray_spellings_and_strips_plurals() -> None:
    assert tokenize("X-ray organs") == tokenize("xray organ") == ["xray", "organ"]
