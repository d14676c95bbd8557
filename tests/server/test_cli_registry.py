"""`amid registry search`: the foundation-model registry for humans, as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def amid(*args: str, hub_cache: Path) -> subprocess.CompletedProcess[str]:
    env = {"HF_HUB_CACHE": str(hub_cache), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True, timeout=120, env=env)


def test_registry_search_ranks_models_and_shows_why_and_availability(tmp_path: Path) -> None:
    found = amid("registry", "search", "chest", "x-ray", "encoder", "--dims", "2d", "--json", hub_cache=tmp_path)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits[0]["id"] == "rad-dino" and hits[0]["availability"] == "obtainable"
    assert hits[0]["why"] == ["dimensionality=2d", "keywords: chest, xray, encoder"]
    table = amid(
        "registry", "search", "--modality", "pathology", "--access", "gated", "--limit", "3", hub_cache=tmp_path
    )
    header, *lines = table.stdout.splitlines()
    assert table.returncode == 0 and len(lines) == 3
    assert header.split() == ["model", "availability", "access", "why", "it", "matched", "licence"]
    assert all(" gated " in line and "modality=pathology; access=gated" in line for line in lines)


def test_registry_search_names_a_bad_filter_without_a_traceback(tmp_path: Path) -> None:
    bad = amid("registry", "search", "--modality", "Xray", hub_cache=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "modality: got 'Xray'; expected 'CT', 'MRI'" in bad.stderr


def test_registry_search_prints_whole_licence_names(tmp_path: Path) -> None:
    found = amid("registry", "search", "--modality", "pathology", "--json", hub_cache=tmp_path)
    assert found.returncode == 0, found.stderr
    longest = max((hit["licence"] for hit in json.loads(found.stdout)), key=len)
    assert len(longest) > 60  # the old table cut licences at 24 characters, mid-word
    table = amid("registry", "search", "--modality", "pathology", hub_cache=tmp_path)
    assert table.returncode == 0 and longest in table.stdout
