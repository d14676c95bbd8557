"""Conformance: the header parser reads what nibabel reads, on files nibabel itself wrote.

nibabel is the reference: every seeded file is written by nibabel (oblique, flipped and sheared
affines; sform only, qform only, both, neither; NIfTI-1 and NIfTI-2; either byte order; scaled;
with extensions; headers nibabel repairs on loading) and loaded by nibabel, and the parser must give
the same shape, dtype, zooms, offset, scaling, affine and axis codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from amid.tools.profiling import nifti_header, nifti_memory
from amid.tools.profiling.readers import _nibabel_header, read_header

DTYPES = ("int16", "uint8", "float32", "int32", "float64", "int8", "uint16", "uint32", "int64")
N_FILES = 160


def _random_affine(rng: np.random.Generator) -> np.ndarray:
    """Rotation (any, often oblique), flips, voxel sizes, sometimes a shear, and an offset."""
    kind = rng.integers(0, 4)
    if kind == 0:  # axis-aligned: a permutation with flips, as scanners write
        rotation = np.eye(3)[rng.permutation(3)] * rng.choice([-1, 1], size=3)
    else:  # oblique: a random rotation, sometimes improper
        rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        if kind == 2:
            rotation[:, 0] = -rotation[:, 0]
    linear = rotation @ np.diag(rng.uniform(0.3, 5.0, size=3))
    if kind == 3:
        linear[0, 1] += rng.uniform(-0.4, 0.4)  # a shear: only the sform keeps it
    affine = np.eye(4)
    affine[:3, :3] = linear
    affine[:3, 3] = rng.uniform(-200, 200, size=3)
    return affine


def _write(path: Path, rng: np.random.Generator, index: int) -> dict[str, Any]:
    nifti2 = index % 5 == 4
    ndim = int(rng.choice([2, 3, 3, 3, 4]))
    shape = tuple(int(s) for s in rng.integers(1, 7, size=ndim))
    dtype = np.dtype(DTYPES[index % len(DTYPES)])
    order = ">" if index % 3 == 1 else "<"
    image_class = nib.Nifti2Image if nifti2 else nib.Nifti1Image
    header = (nib.Nifti2Header if nifti2 else nib.Nifti1Header)(endianness=order)
    data = (rng.integers(0, 100, size=shape)).astype(dtype)
    affine = _random_affine(rng)
    image = image_class(data, None, header=header)
    image.header.set_zooms(tuple(float(z) for z in rng.uniform(0.2, 4.0, size=ndim)))
    forms = ("both", "sform", "qform", "neither")[index % 4]
    if forms in ("both", "qform"):  # the quaternion keeps the rotation and a flip (qfac), not shears
        image.header.set_qform(_random_affine(rng), code=int(rng.choice([1, 2, 3])))
    if forms in ("both", "sform"):
        image.header.set_sform(affine, code=int(rng.choice([1, 2, 4, 5])))
    if rng.random() < 0.3:
        image.header.set_slope_inter(float(rng.uniform(0.1, 3)), float(rng.uniform(-50, 50)))
    if rng.random() < 0.25:
        image.header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"seeded extension " * 5))
    suffix = ".nii.gz" if index % 2 else ".nii"
    target = path / f"f{index:03d}{suffix}"
    nib.save(image, target)
    if suffix == ".nii" and rng.random() < 0.5:
        _damage(target, rng)  # fields nibabel repairs on loading
    return {"ndim": ndim, "order": order}


def _damage(target: Path, rng: np.random.Generator) -> None:
    """Rewrite header fields as real files hold them: qfac 0, a pixdim 0 or negative, odd codes,
    a zero or NaN slope."""
    raw = bytearray(target.read_bytes())
    header_class = nib.Nifti2Header if int.from_bytes(raw[:4], "little") in (540, 0x1C020000) else nib.Nifti1Header
    header = header_class.from_fileobj(__import__("io").BytesIO(bytes(raw)), check=False)
    choice = rng.integers(0, 6)
    if choice == 0:
        header["pixdim"][0] = 0
    elif choice == 1:
        header["pixdim"][int(rng.integers(1, 4))] = 0
    elif choice == 2:
        header["pixdim"][int(rng.integers(1, 4))] *= -1
    elif choice == 3:
        header["qform_code"] = 7
        header["sform_code"] = int(rng.choice([0, 9]))
    elif choice == 4:
        header["scl_slope"] = float(rng.choice([0.0, np.nan]))
        header["scl_inter"] = 4.0
    else:
        header["bitpix"] = 3
    block = header.binaryblock
    raw[: len(block)] = block
    target.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def seeded_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("nifti_headers")
    rng = np.random.default_rng(20240611)
    for index in range(N_FILES):
        _write(folder, rng, index)
    return sorted(folder.iterdir())


def _codes(affine: np.ndarray) -> str:
    return "".join(str(code) for code in nib.aff2axcodes(affine))


def test_the_parser_reads_what_nibabel_reads(seeded_files: list[Path]) -> None:
    kinds = {"sform": 0, "qform": 0, "neither": 0, "nifti2": 0, "big": 0, "scaled": 0, "oblique": 0}
    for path in seeded_files:
        reference: Any = nib.load(path)
        parsed = nifti_header.read(str(path))
        assert parsed is not None, path.name
        header = reference.header
        assert parsed.shape == reference.shape, path.name
        assert parsed.dtype == header.get_data_dtype(), path.name  # byte order included
        assert parsed.zooms == tuple(float(z) for z in header.get_zooms()), path.name
        assert parsed.offset == int(reference.dataobj.offset), path.name
        assert (parsed.slope, parsed.inter) == (reference.dataobj.slope, reference.dataobj.inter), path.name
        assert np.allclose(parsed.affine, reference.affine, rtol=1e-12, atol=1e-12), path.name
        assert nifti_header.axis_codes(parsed.affine) == _codes(reference.affine), path.name
        codes = int(header["sform_code"]), int(header["qform_code"])
        kinds["sform" if codes[0] else "qform" if codes[1] else "neither"] += 1
        kinds["nifti2"] += isinstance(header, nib.Nifti2Header)
        kinds["big"] += parsed.dtype.byteorder == ">"
        kinds["scaled"] += parsed.scaled
        kinds["oblique"] += int(np.count_nonzero(np.abs(parsed.affine[:3, :3]) > 1e-6) > 3)
    assert min(kinds.values()) >= 8, kinds  # every kind of header was really exercised


def test_image_headers_are_the_same_with_and_without_nibabel(seeded_files: list[Path]) -> None:
    for path in seeded_files:
        expected = _nibabel_header(str(path))
        assert read_header(str(path)) == expected, path.name
        with nifti_memory.case_files():
            assert read_header(str(path)) == expected, path.name


def test_axis_codes_match_nibabels_on_any_matrix() -> None:
    rng = np.random.default_rng(7)
    matrices = [rng.normal(size=(4, 4)) for _ in range(400)]
    matrices += [np.diag([*rng.choice([-1.0, 1.0], 3), 1.0])[[*rng.permutation(3), 3]] for _ in range(50)]
    degenerate = np.eye(4)
    degenerate[:, 1] = 0  # a voxel axis that moves nowhere
    tie = np.eye(4)
    tie[:3, :3] = [[1, 1, 0], [1, -1, 0], [0, 0, 1]]  # two axes at 45 degrees
    for matrix in [*matrices, degenerate, tie, np.zeros((4, 4))]:
        assert nifti_header.axis_codes(matrix) == _codes(matrix), matrix


def _nifti1_bytes(**fields: Any) -> bytes:
    header = nib.Nifti1Header()
    header.set_data_shape((4, 4, 4))
    header.set_data_dtype(np.int16)
    for name, value in fields.items():
        header[name] = value
    return header.binaryblock + b"\0" * 4


@pytest.mark.parametrize(
    "fields",
    [
        {"magic": b"ni1"},  # a header-and-image pair
        {"datatype": 128},  # RGB
        {"datatype": 32},  # complex
        {"vox_offset": 100},  # inside the header
        {"scl_slope": 2.0, "scl_inter": np.inf},
        {"pixdim": [1, np.nan, 1, 1, 1, 1, 1, 1]},
        {"dim": [3, -1, 1, 1, 1, 1, 1, 1]},  # FreeSurfer's large vector
    ],
)
def test_headers_outside_the_plain_case_go_to_nibabel(fields: dict[str, Any]) -> None:
    assert nifti_header.parse(_nifti1_bytes(**fields)) is None


def test_not_a_nifti_header_parses_to_none() -> None:
    assert nifti_header.parse(b"\x00" * 600) is None
    assert nifti_header.parse(b"\x5c\x01") is None  # too short
    assert nifti_header.parse(_nifti1_bytes()[:300]) is None  # cut inside the header
