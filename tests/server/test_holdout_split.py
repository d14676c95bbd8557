"""The server-held holdout at init: `amid init --holdout-fraction F` holds out whole groups with a
seed, and no public file under task/ names a held-out case or group afterwards."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.errors import InvalidInput
from amid.server.holdout_split import HeldNames, scrub_public_tables, with_holdout_fraction
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.importers import import_task

TEXT_ENDINGS = (".csv", ".tsv", ".json", ".yaml", ".md", ".txt")


def amid(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True, timeout=180)


def held_out(ws: Workspace) -> list[dict[str, str]]:
    return json.loads((ws.private_dir / "holdout.json").read_text(encoding="utf-8"))["cases"]


def public_mentions(ws: Workspace, names: set[str]) -> list[tuple[str, str]]:
    """(file, name) for every held-out name standing as a whole token in a public text file or file name."""
    token = re.compile(r"(?<![0-9A-Za-z])(" + "|".join(re.escape(n) for n in names) + r")(?![0-9A-Za-z])")
    found = []
    for path in ws.task_dir.rglob("*"):
        rel = str(path.relative_to(ws.task_dir))
        found += [(rel, m) for m in token.findall(rel)]
        if path.is_file() and path.name.endswith(TEXT_ENDINGS):
            found += [(rel, m) for m in token.findall(path.read_text(encoding="utf-8"))]
    return found


def test_init_with_a_holdout_fraction_holds_out_whole_patients_and_scrubs_every_public_file(
    demo_challenge: Path, tmp_path: Path
) -> None:
    result = amid("init", str(demo_challenge), "-w", str(tmp_path / "ws"), "--holdout-fraction", "0.2")
    assert result.returncode == 0, result.stderr
    ws = Workspace.open(tmp_path / "ws")
    held = held_out(ws)
    patients = {c["group"] for c in held}
    assert len(held) == 4 and len(patients) == 2  # 20 % of 20 scans: two patients, both scans each
    assert ws.contract().validation.holdout_fraction == 0.2
    assert "16 training cases" in result.stdout

    assert public_mentions(ws, {c["case_id"] for c in held} | patients) == []
    with (ws.task_dir / "public/train/patients.csv").open(encoding="utf-8") as handle:
        public_rows = list(csv.DictReader(handle))
    assert len(public_rows) == 16 and not {r["patient_id"] for r in public_rows} & patients
    with (ws.private_dir / "holdout/public/train/patients.csv").open(encoding="utf-8") as handle:
        kept = list(csv.DictReader(handle))
    assert sorted(r["case_id"] for r in kept) == sorted(c["case_id"] for c in held)  # the server keeps them
    assert not set(ws.folds().case_groups) & {c["case_id"] for c in held}


def test_the_holdout_is_seeded(demo_challenge: Path, tmp_path: Path) -> None:
    imported = import_task(demo_challenge)
    imported.contract = with_holdout_fraction(imported.contract, 0.3)
    first = init_workspace(imported, tmp_path / "a")
    second = init_workspace(imported, tmp_path / "b")
    assert held_out(first) == held_out(second) and len({c["group"] for c in held_out(first)}) == 3


def test_a_fraction_outside_zero_to_half_is_refused_naming_the_option(demo_challenge: Path, tmp_path: Path) -> None:
    result = amid("init", str(demo_challenge), "-w", str(tmp_path / "ws"), "--holdout-fraction", "0.7")
    assert result.returncode == 2 and "--holdout-fraction" in result.stderr and "0.5" in result.stderr
    assert not (tmp_path / "ws").exists()
    imported = import_task(demo_challenge)
    with pytest.raises(InvalidInput, match="--holdout-fraction"):
        with_holdout_fraction(imported.contract, -0.1)


def test_hard_linked_data_can_have_a_holdout_and_the_users_files_keep_their_bytes(
    demo_challenge: Path, tmp_path: Path
) -> None:
    source = tmp_path / "challenge"
    shutil.copytree(demo_challenge, source)  # --link shares inodes: a copy of the session's task
    before = {p: p.read_bytes() for p in source.rglob("*") if p.is_file()}
    imported = import_task(source)
    imported.contract = with_holdout_fraction(imported.contract, 0.2)
    ws = init_workspace(imported, tmp_path / "ws", link_data=True)

    assert len(held_out(ws)) == 4
    assert {p: p.read_bytes() for p in source.rglob("*") if p.is_file()} == before  # scrubbed in task/ only
    image = next((ws.task_dir / "public/train/images").glob("*.nii.gz"))
    assert image.stat().st_ino == (source / "public/train/images" / image.name).stat().st_ino  # linked, not copied
    assert not [p for p in ws.task_dir.rglob("*") if p.is_symlink()]
    patients = (ws.task_dir / "public/train/patients.csv").read_text(encoding="utf-8")
    assert patients != (source / "public/train/patients.csv").read_text(encoding="utf-8")


def test_scrubbing_drops_rows_items_and_keys_but_not_bare_numbers(tmp_path: Path) -> None:
    task, keep = tmp_path / "task", tmp_path / "keep"
    (task / "meta").mkdir(parents=True)
    (task / "meta/sites.csv").write_text("case_id,site,label,width\nc07,S1,1,7\nc08,S2,7,1\n", encoding="utf-8")
    (task / "meta/numbers.csv").write_text("id,score\n7,0.5\n8,7.0\n", encoding="utf-8")
    dataset = {
        "training": [{"image": "./imagesTr/c07_0000.nii.gz"}, {"image": "./imagesTr/c08_0000.nii.gz"}],
        "by_case": {"c07": 0.9, "c08": 0.8},
        "channel_names": {"0": "CT", "7": "PET"},
        "numTraining": 2,
    }
    (task / "dataset.json").write_text(json.dumps(dataset), encoding="utf-8")

    changed = scrub_public_tables(task, keep, HeldNames(frozenset({"c07", "7"}), frozenset({"S1"})), "site")

    assert sorted(changed) == ["dataset.json", "meta/numbers.csv", "meta/sites.csv"]
    assert (task / "meta/sites.csv").read_text(encoding="utf-8") == "case_id,site,label,width\nc08,S2,7,1\n"
    assert (task / "meta/numbers.csv").read_text(encoding="utf-8") == "id,score\n8,7.0\n"  # "7.0" is no id
    scrubbed = json.loads((task / "dataset.json").read_text(encoding="utf-8"))
    assert scrubbed["training"] == [{"image": "./imagesTr/c08_0000.nii.gz"}] and scrubbed["by_case"] == {"c08": 0.8}
    assert scrubbed["channel_names"] == {"0": "CT", "7": "PET"}  # a key "7" is not a case
    assert "c07,S1,1,7" in (keep / "meta/sites.csv").read_text(encoding="utf-8")
