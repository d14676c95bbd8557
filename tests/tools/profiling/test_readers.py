"""Header-first readers on real files shipped in wheels (REFERENCE §7) and on generated ones."""

from __future__ import annotations

import gzip
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from pydicom.data import get_testdata_file

from amid.server.errors import DataUnreadable
from amid.tools.profiling.inputs import LabelsTable
from amid.tools.profiling.readers import read_array, read_header
from amid.tools.profiling.tables import read_coco, read_labels
from tests.tools.profiling.factories import load_voxels, write_nifti

NIBABEL_DATA = Path(nib.__file__).parent / "tests" / "data"


def skimage_file(name: str) -> Path:
    import skimage

    return Path(skimage.__file__).parent / "data" / name


def test_nifti_4d_header_gives_spatial_shape_channels_spacing_and_orientation() -> None:
    header = read_header(str(NIBABEL_DATA / "example4d.nii.gz"))
    assert header.shape == (128, 96, 24)
    assert header.n_channels == 2
    assert header.spacing == pytest.approx((2.0, 2.0, 2.2), abs=1e-5)
    assert header.orientation == "LAS"
    assert header.dtype == "int16"
    assert header.spatial_dims == 3


def test_nifti_anatomical_is_las_at_two_millimetres() -> None:
    header = read_header(str(NIBABEL_DATA / "anatomical.nii"))
    assert (header.shape, header.spacing, header.orientation) == ((33, 41, 25), (2.0, 2.0, 2.0), "LAS")
    assert header.dtype == "int16"  # stored big-endian (>i2); reported without byte order
    array, _ = read_array(str(NIBABEL_DATA / "anatomical.nii"))
    assert array.shape == (33, 41, 25)


def test_four_d_nifti_array_puts_channels_last() -> None:
    array, _ = read_array(str(NIBABEL_DATA / "example4d.nii.gz"))
    assert array.shape == (128, 96, 24, 2)
    reference = load_voxels(str(NIBABEL_DATA / "example4d.nii.gz"))
    assert np.array_equal(array, reference)


@pytest.mark.parametrize(
    ("name", "shape", "spacing", "modality"),
    [
        ("CT_small.dcm", (128, 128, 1), (0.661468, 0.661468, 5.0), "CT"),
        ("MR_small.dcm", (64, 64, 1), (0.3125, 0.3125, 1.0), "MR"),
    ],
)
def test_dicom_slices_are_lps_two_dimensional_with_modality(
    name: str, shape: tuple[int, ...], spacing: tuple[float, ...], modality: str
) -> None:
    path = str(get_testdata_file(name))
    header = read_header(path)
    assert header.file_type == "dicom"
    assert header.shape == shape
    assert header.spacing == pytest.approx(spacing)
    assert header.orientation == "LPS"
    assert header.spatial_dims == 2
    assert header.meta["modality"] == modality
    array, _ = read_array(path)
    assert array.shape == shape


def test_histology_png_is_an_rgb_tile_read_from_its_header() -> None:
    header = read_header(str(skimage_file("ihc.png")))
    assert (header.shape, header.n_channels, header.is_rgb, header.dtype) == ((512, 512), 3, True, "uint8")
    assert header.spacing_unit == "pixel"
    array, _ = read_array(str(skimage_file("ihc.png")))
    assert array.shape == (512, 512, 3)


def test_z_range_decodes_only_the_requested_slices(tmp_path: Path) -> None:
    volume = np.arange(6 * 5 * 9, dtype=np.int16).reshape(6, 5, 9)
    path = write_nifti(tmp_path / "v.nii.gz", volume, (1.0, 1.0, 2.0))
    slab, header = read_array(path, z_range=(3, 6))
    assert header.shape == (6, 5, 9)
    assert np.array_equal(slab, volume[:, :, 3:6])


def test_truncated_nifti_has_a_header_but_unreadable_voxels(tmp_path: Path) -> None:
    path = Path(write_nifti(tmp_path / "v.nii.gz", np.ones((40, 40, 40), np.float32), (1.0, 1.0, 1.0)))
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[: len(raw) // 3]))
    assert read_header(str(path)).shape == (40, 40, 40)
    with pytest.raises(DataUnreadable, match=r"v\.nii\.gz"):
        read_array(str(path))


def test_garbage_and_unknown_files_raise_data_unreadable_naming_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "broken.nii.gz"
    garbage.write_bytes(b"not a nifti at all")
    with pytest.raises(DataUnreadable, match=r"broken\.nii\.gz"):
        read_header(str(garbage))
    unknown = tmp_path / "graph.pkl"
    unknown.write_bytes(b"\x00")
    with pytest.raises(DataUnreadable, match="unsupported image type"):
        read_header(str(unknown))


def test_mha_and_nrrd_geometry_comes_from_itk_in_ras_terms(tmp_path: Path) -> None:
    image = sitk.GetImageFromArray(np.zeros((4, 5, 6), np.int16))  # numpy (z, y, x) -> size (6, 5, 4)
    image.SetSpacing((0.5, 0.6, 3.0))
    for suffix in ("mha", "nrrd"):
        path = str(tmp_path / f"v.{suffix}")
        sitk.WriteImage(image, path)
        header = read_header(path)
        assert (header.shape, header.spacing, header.orientation) == ((6, 5, 4), (0.5, 0.6, 3.0), "LPS")
        assert read_array(path)[0].shape == (6, 5, 4)


def test_dicom_series_folder_counts_slices_and_measures_their_gap(tmp_path: Path) -> None:
    for index in range(3):
        slice_image = sitk.GetImageFromArray(np.full((1, 8, 8), index, np.int16))
        slice_image.SetSpacing((0.5, 0.5, 1.0))
        tags = {"0020|0032": f"0\\0\\{index * 2.5}", "0020|0013": str(index + 1), "0008|0060": "CT"}
        tags |= {"0020|000e": "1.2.3.4", "0020|000d": "1.2.3", "0020|0037": "1\\0\\0\\0\\1\\0"}
        for tag, value in tags.items():
            slice_image.SetMetaData(tag, value)
        writer = sitk.ImageFileWriter()
        writer.KeepOriginalImageUIDOn()
        writer.SetFileName(str(tmp_path / f"s{index}.dcm"))
        writer.Execute(slice_image)
    header = read_header(str(tmp_path))
    assert header.file_type == "dicom_series"
    assert header.shape == (8, 8, 3)
    assert header.spacing[2] == pytest.approx(2.5)
    array, _ = read_array(str(tmp_path), z_range=(1, 3))
    assert array.shape == (8, 8, 2)
    assert array[0, 0].tolist() == [1, 2]


def test_pyramidal_tiff_reports_tiles_and_levels_and_reads_a_level(tmp_path: Path) -> None:
    path = tmp_path / "slide.tif"
    pixels = np.random.default_rng(0).integers(0, 255, (256, 256, 3), dtype=np.uint8)
    with tifffile.TiffWriter(path) as tif:
        tif.write(pixels, tile=(64, 64), subifds=1, photometric="rgb", resolution=(20000, 20000), resolutionunit=3)
        tif.write(pixels[::2, ::2], tile=(64, 64), subfiletype=1, photometric="rgb")
    header = read_header(str(path))
    assert (header.shape, header.n_channels, header.is_rgb) == ((256, 256), 3, True)
    assert header.is_tiled and header.n_levels == 2
    assert header.spacing == pytest.approx((0.0005, 0.0005))  # 20000 px per cm = 0.5 um
    array, used = read_array(str(path))
    assert array.shape == (256, 256, 3)
    assert used.shape == (256, 256)


def test_labels_table_and_coco_file_are_parsed(tmp_path: Path) -> None:
    table = tmp_path / "labels.csv"
    table.write_text("id,diagnosis\na,benign\nb,malignant\n", encoding="utf-8")
    assert read_labels(LabelsTable(path=str(table), id_column="id", label_column="diagnosis")) == {
        "a": "benign",
        "b": "malignant",
    }
    with pytest.raises(DataUnreadable, match="no column 'label'"):
        read_labels(LabelsTable(path=str(table), id_column="id"))
    coco = tmp_path / "boxes.json"
    coco.write_text(
        '{"images": [{"id": 1, "file_name": "a.png"}], "annotations": [{"image_id": 1, "bbox": [1, 2, 3, 4]}]}',
        encoding="utf-8",
    )
    assert read_coco(str(coco)).annotations[0].bbox == (1, 2, 3, 4)
    coco.write_text("{}", encoding="utf-8")
    with pytest.raises(DataUnreadable, match=r"boxes\.json"):
        read_coco(str(coco))
