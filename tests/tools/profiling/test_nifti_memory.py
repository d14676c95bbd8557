"""Profile workers read each NIfTI file once, in memory: the same voxels and headers as nibabel."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from amid.server.errors import DataUnreadable
from amid.tools.profiling import nifti_header, nifti_memory
from amid.tools.profiling.readers import read_array, read_header


@pytest.fixture(autouse=True, params=["isal_reader", "gzip_file"])
def gzip_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with ISA-L's in-memory reader and with the GzipFile that wraps it (the fallback)."""
    if request.param == "gzip_file":
        monkeypatch.setattr(nifti_header, "MEMORY_READER", None)
    else:
        assert nifti_header.MEMORY_READER is not None
    return str(request.param)


def _save(path: Path, volume: np.ndarray, **scaling: float) -> Path:
    image = nib.Nifti1Image(volume, np.diag([-0.8, -0.8, 2.5, 1.0]))
    if scaling:
        image.header.set_slope_inter(scaling["slope"], scaling["inter"])
    nib.save(image, path)
    return path


def _both(path: Path, z_range: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    outside, header = read_array(str(path), z_range)
    with nifti_memory.case_files():
        assert read_header(str(path)) == header
        inside, _ = read_array(str(path), z_range)
    return outside, inside


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.float32, np.dtype(">i2")])
def test_in_memory_voxels_equal_nibabels_for_whole_volumes_and_slabs(tmp_path: Path, dtype: np.dtype) -> None:
    volume = np.random.default_rng(3).integers(0, 90, (7, 6, 11)).astype(dtype)
    path = _save(tmp_path / "v.nii.gz", volume)
    for z_range in (None, (0, 1), (4, 9), (10, 11)):
        outside, inside = _both(path, z_range)
        expected = volume if z_range is None else volume[:, :, slice(*z_range)]
        assert np.array_equal(inside, expected) and np.array_equal(outside, inside)
        assert inside.dtype.isnative and inside.flags.writeable


def test_scaled_and_uncompressed_volumes_read_as_before(tmp_path: Path) -> None:
    volume = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    for name in ("s.nii.gz", "s.nii"):
        path = _save(tmp_path / name, volume, slope=0.5, inter=-3.0)
        outside, inside = _both(path, (1, 4))
        assert inside.dtype == outside.dtype and np.allclose(inside, volume[:, :, 1:4] * 0.5 - 3.0)


def test_a_multi_member_gzip_reads_whole(tmp_path: Path) -> None:
    volume = np.random.default_rng(4).integers(-1000, 1000, (16, 16, 9)).astype(np.int16)
    path = _save(tmp_path / "m.nii.gz", volume)
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]))
    _, inside = _both(path)
    assert np.array_equal(inside, volume)


def test_a_truncated_file_keeps_its_header_and_refuses_its_voxels(tmp_path: Path) -> None:
    path = _save(tmp_path / "t.nii.gz", np.ones((30, 30, 30), np.int16))
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[: len(raw) // 3]))
    with nifti_memory.case_files():
        assert read_header(str(path)).shape == (30, 30, 30)
        assert read_array(str(path), (0, 2))[0].shape == (30, 30, 2)  # the slices that are there
        with pytest.raises(DataUnreadable, match=r"t\.nii\.gz: cannot read voxels .*truncated"):
            read_array(str(path))


def test_the_hash_comes_from_the_bytes_read_once_and_files_close_after_the_case(tmp_path: Path) -> None:
    path = _save(tmp_path / "h.nii.gz", np.zeros((5, 5, 5), np.int16))
    assert nifti_memory.file_sha256(str(path)) is None  # not open: the caller reads the file itself
    with nifti_memory.case_files():
        read_header(str(path))
        assert nifti_memory.file_sha256(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not nifti_memory.active() and nifti_memory.file_sha256(str(path)) is None


def test_a_cut_gzip_stream_gives_the_slices_before_the_cut_and_refuses_the_rest(tmp_path: Path) -> None:
    volume = np.random.default_rng(5).integers(-1000, 1000, (32, 32, 40)).astype(np.int16)
    path = _save(tmp_path / "c.nii.gz", volume)
    compressed = path.read_bytes()
    path.write_bytes(compressed[: len(compressed) // 2])  # no end-of-stream marker, no trailer
    with nifti_memory.case_files():
        assert read_header(str(path)).shape == (32, 32, 40)
        assert np.array_equal(read_array(str(path), (0, 3))[0], volume[:, :, :3])
        with pytest.raises(DataUnreadable, match=r"c\.nii\.gz: cannot read voxels .*truncated"):
            read_array(str(path))


def test_zero_padding_after_the_gzip_member_reads_whole(tmp_path: Path) -> None:
    volume = np.random.default_rng(6).integers(0, 3, (12, 10, 8)).astype(np.uint8)
    path = _save(tmp_path / "p.nii.gz", volume)
    path.write_bytes(path.read_bytes() + b"\x00" * 512)
    _, inside = _both(path)
    assert np.array_equal(inside, volume)


def test_the_header_is_parsed_without_nibabel_inside_a_case(tmp_path: Path) -> None:
    path = _save(tmp_path / "n.nii.gz", np.zeros((6, 5, 4), np.int16))
    with nifti_memory.case_files():
        parsed = nifti_memory.load_header(str(path))
        assert parsed is not None and parsed.shape == (6, 5, 4) and nifti_memory.fits(parsed)
        assert nifti_memory.opened(str(path)).prefix[:4] == (348).to_bytes(4, "little")
