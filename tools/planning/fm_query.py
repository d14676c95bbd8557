"""Find foundation models in the registry: exact filters plus a BM25-ranked keyword search.

Each hit says why it matched and whether its weights are usable here. Availability is read from
the local Hugging Face hub cache only; nothing is ever downloaded.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from amid.registry.schemas import Access, Dimensionality, FoundationModel, Modality, TaskFamily

Availability = Literal["cached", "gated", "obtainable", "unknown_offline"]

# BM25 constants as usually chosen (Robertson & Zaragoza); the corpus is tiny, so they matter little.
_K1 = 1.2
_B = 0.75
_TOKEN = re.compile(r"[a-z0-9]+")
# Words that carry no intent in a model search; "model" appears in nearly every name.
_STOPWORDS = frozenset({"a", "an", "and", "for", "in", "of", "on", "the", "to", "with", "model"})
_JOINED = {
    "x-ray": "xray",
    "x ray": "xray",
    "h&e": "he",
    "whole-body": "wholebody",
    "whole body": "wholebody",
}


class ModelHit(BaseModel):
    """One registry model that passed the filters, with its score and the reasons it matched."""

    model_config = ConfigDict(frozen=True)

    model: FoundationModel
    score: float
    why: list[str]
    availability: Availability


def query_models(
    models: Sequence[FoundationModel],
    *,
    modality: Modality | None = None,
    dimensionality: Dimensionality | None = None,
    task_family: TaskFamily | None = None,
    access: Access | None = None,
    licence: str | None = None,
    keywords: str | Sequence[str] | None = None,
    limit: int = 10,
    hub_cache_dir: Path | None = None,
) -> list[ModelHit]:
    """Models passing every given filter, best keyword match first (registry order without keywords).

    `licence` matches as a case-insensitive substring ("apache" finds "Apache-2.0"); `hub_cache_dir`
    is the Hugging Face hub cache to inspect (None: huggingface_hub's default location).
    """
    filtered = [
        (model, reasons)
        for model in models
        if (reasons := _filter_reasons(model, modality, dimensionality, task_family, access, licence)) is not None
    ]
    ranked = _rank(filtered, _query_tokens(keywords))
    cached = cached_hub_files(hub_cache_dir)
    return [
        ModelHit(model=model, score=round(score, 4), why=why, availability=availability_of(model, cached))
        for model, score, why in ranked[: max(limit, 0)]
    ]


def _filter_reasons(
    model: FoundationModel,
    modality: str | None,
    dimensionality: str | None,
    task_family: str | None,
    access: str | None,
    licence: str | None,
) -> list[str] | None:
    """The filters the model satisfies, or None when one of them fails."""
    checks = [
        ("modality", modality, modality in model.modalities),
        ("dimensionality", dimensionality, dimensionality in model.dimensionality),
        ("task_family", task_family, task_family in model.task_families),
        ("access", access, access == model.access),
        ("licence", licence, licence is not None and licence.casefold() in model.licence.casefold()),
    ]
    reasons = []
    for name, wanted, holds in checks:
        if wanted is None:
            continue
        if not holds:
            return None
        reasons.append(f"{name}={wanted}")
    return reasons


def _rank(
    candidates: list[tuple[FoundationModel, list[str]]], query: list[str]
) -> list[tuple[FoundationModel, float, list[str]]]:
    if not query:
        return [(model, 0.0, reasons) for model, reasons in candidates]
    documents = [_document_tokens(model) for model, _ in candidates]
    scorer = _Bm25(documents)
    scored = []
    for (model, reasons), document in zip(candidates, documents, strict=True):
        score, matched = scorer.score(document, query)
        if score > 0:
            scored.append((model, score, [*reasons, f"keywords: {', '.join(matched)}"]))
    # Ties fall back to the id so that results are stable across runs.
    scored.sort(key=lambda item: (-item[1], item[0].id))
    return scored


class _Bm25:
    """Okapi BM25 over a fixed list of token documents."""

    def __init__(self, documents: list[list[str]]) -> None:
        self._count = len(documents)
        self._average_length = sum(map(len, documents)) / max(self._count, 1)
        self._document_frequency: Counter[str] = Counter()
        for document in documents:
            self._document_frequency.update(set(document))

    def score(self, document: list[str], query: list[str]) -> tuple[float, list[str]]:
        frequencies = Counter(document)
        length_norm = 1 - _B + _B * len(document) / max(self._average_length, 1e-9)
        total, matched = 0.0, []
        for term in dict.fromkeys(query):
            frequency = frequencies[term]
            if frequency == 0:
                continue
            total += self._idf(term) * frequency * (_K1 + 1) / (frequency + _K1 * length_norm)
            matched.append(term)
        return total, matched

    def _idf(self, term: str) -> float:
        df = self._document_frequency[term]
        return math.log(1 + (self._count - df + 0.5) / (df + 0.5))


def _document_tokens(model: FoundationModel) -> list[str]:
    # Name and keywords are repeated: they describe the model, recommended_use only mentions things.
    strong = " ".join([model.id, model.name, *model.keywords])
    weak = " ".join(
        [model.domain, *model.modalities, *model.dimensionality, *model.task_families, model.recommended_use]
    )
    return tokenize(strong) * 2 + tokenize(weak)


def _query_tokens(keywords: str | Sequence[str] | None) -> list[str]:
    if keywords is None:
        return []
    text = keywords if isinstance(keywords, str) else " ".join(keywords)
    return tokenize(text)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens with a light plural stem, joining 'x-ray' and friends into one token."""
    lowered = text.casefold().replace("_", " ")
    for phrase, joined in _JOINED.items():
        lowered = lowered.replace(phrase, joined)
    stems = (_stem(token) for token in _TOKEN.findall(lowered))
    return [token for token in stems if token not in _STOPWORDS]


def _stem(token: str) -> str:
    # Enough for 'organs'/'organ' and 'cells'/'cell' without a stemming dependency.
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def cached_hub_files(hub_cache_dir: Path | None) -> dict[str, frozenset[str]]:
    """Model repo id (lower case) -> file names present in any cached revision; empty without a cache."""
    from huggingface_hub import scan_cache_dir  # here, not at import: it is off the server's start path
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(hub_cache_dir)
    except (CacheNotFound, OSError):
        return {}
    present: dict[str, frozenset[str]] = {}
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        names = {file.file_name for revision in repo.revisions for file in revision.files}
        present[repo.repo_id.casefold()] = frozenset(names)
    return present


def availability_of(model: FoundationModel, cached: dict[str, frozenset[str]]) -> Availability:
    """Whether the model's weights are here, fetchable, behind a gate, or unknown offline."""
    if model.hub_id is not None and _has_weights(model.files, cached.get(model.hub_id.casefold())):
        return "cached"
    if model.access == "gated":
        return "gated"
    if model.access == "open" and (model.hub_id or model.repository):
        return "obtainable"
    return "unknown_offline"


def _has_weights(expected: Iterable[str], present: frozenset[str] | None) -> bool:
    if not present:
        return False
    expected_names = {Path(name).name for name in expected}
    # A cached config or README alone is not the model; require one of the weight files when known.
    return not expected_names or bool(expected_names & present)
