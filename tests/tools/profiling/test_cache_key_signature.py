"""The cache key's file signature: one stat per file, the same key as before (stored profiles stay current)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amid.tools.profiling import profile


def _signature_before(path: str) -> str:
    """The signature as it was written before it took one stat per file (pathlib, four stats)."""
    target = Path(path)
    if not target.exists():
        return "missing"
    files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    return ";".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)


def test_signature_is_unchanged_for_files_folders_links_and_missing_paths(tmp_path: Path) -> None:
    image = tmp_path / "case_0000.nii.gz"
    image.write_bytes(b"x" * 10)
    series = tmp_path / "series"
    (series / "sub").mkdir(parents=True)
    for i, name in enumerate(("b.dcm", "a.dcm", "sub/c.dcm")):
        (series / name).write_bytes(b"y" * i)
    link = tmp_path / "linked.nii.gz"
    link.symlink_to(image)
    broken = tmp_path / "broken.nii.gz"
    broken.symlink_to(tmp_path / "nowhere")
    for path in (image, series, link, broken, tmp_path / "absent.nii.gz"):
        assert profile._stat_signature(str(path)) == _signature_before(str(path)), path


def test_signature_of_a_file_takes_one_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = tmp_path / "case_0000.nii.gz"
    image.write_bytes(b"x")
    calls: list[str] = []
    real_stat = os.stat

    def counting_stat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        calls.append(str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(profile.os, "stat", counting_stat)
    assert profile._stat_signature(str(image)).startswith("case_0000.nii.gz:1:")
    assert calls == [str(image)]
