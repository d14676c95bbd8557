from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from amid.registry.loader import label_adapters
from amid.server.errors import DataUnreadable, InvalidInput
from amid.tools.task.label_adapters import ADAPTERS, convert

TISSUE = {"classes": {"stroma": 1, "tumor": 3}, "shape": [8, 10]}


def _box(x0: float, y0: float, x1: float, y1: float) -> list[list[float]]:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]


def _feature(name: str | None, geometry: dict[str, Any], key: str = "classification") -> dict[str, Any]:
    properties = {} if name is None else {key: {"name": name}} if key == "classification" else {key: name}
    return {"type": "Feature", "geometry": geometry, "properties": properties}


def _geojson(path: Path, *features: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"type": "FeatureCollection", "features": list(features)}))
    return path


def _mask(tmp_path: Path, options: dict[str, Any], *features: dict[str, Any]) -> np.ndarray:
    source = _geojson(tmp_path / "case_tissue.geojson", *features)
    convert("geojson_to_label_mask", source, tmp_path / "out" / "case.tif", options)
    with Image.open(tmp_path / "out" / "case.tif") as image:
        return np.asarray(image)


def _polygon(*rings: list[list[float]]) -> dict[str, Any]:
    return {"type": "Polygon", "coordinates": list(rings)}


def test_mask_paints_each_class_value_and_skips_unknown_classes(tmp_path: Path) -> None:
    mask = _mask(
        tmp_path,
        TISSUE,
        _feature("Stroma", _polygon(_box(1, 1, 3, 2))),
        _feature("tumor", _polygon(_box(6, 4, 8, 6))),
        _feature("necrosis", _polygon(_box(0, 6, 2, 7))),
    )
    expected = np.zeros((8, 10), np.uint8)
    expected[1:3, 1:4] = 1  # vertices inclusive: rows y0..y1, columns x0..x1
    expected[4:7, 6:9] = 3
    assert mask.dtype == np.uint8
    np.testing.assert_array_equal(mask, expected)


def test_mask_later_features_overwrite_earlier_ones(tmp_path: Path) -> None:
    mask = _mask(
        tmp_path, TISSUE, _feature("tumor", _polygon(_box(0, 0, 5, 5))), _feature("stroma", _polygon(_box(3, 3, 7, 7)))
    )
    assert mask[1, 1] == 3 and mask[4, 4] == 1 and mask[6, 6] == 1


def test_mask_fills_holes_by_default_and_clears_them_on_request(tmp_path: Path) -> None:
    holed = _feature("tumor", _polygon(_box(0, 0, 7, 7), _box(3, 3, 4, 4)))
    assert (_mask(tmp_path, TISSUE, holed)[0:8, 0:8] == 3).all()
    cleared = _mask(tmp_path, {**TISSUE, "holes": "background"}, holed)
    assert (cleared[3:5, 3:5] == 0).all() and cleared[2, 2] == 3 and cleared[5, 5] == 3


def test_mask_paints_every_part_of_a_multipolygon_and_ignores_other_geometries(tmp_path: Path) -> None:
    parts = {"type": "MultiPolygon", "coordinates": [[_box(0, 0, 1, 1)], [_box(8, 6, 9, 7)], []]}
    point = {"type": "Point", "coordinates": [5, 5]}
    mask = _mask(tmp_path, TISSUE, _feature("stroma", parts), _feature("tumor", point))
    assert mask[0, 0] == 1 and mask[7, 9] == 1 and int((mask > 0).sum()) == 8


def test_mask_reads_the_class_from_properties_name_when_classification_is_absent(tmp_path: Path) -> None:
    mask = _mask(tmp_path, TISSUE, _feature("TUMOR", _polygon(_box(0, 0, 1, 1)), key="name"))
    assert mask[0, 0] == 3


def test_mask_takes_its_shape_from_the_case_image_when_none_is_given(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((5, 12, 3), np.uint8)).save(tmp_path / "case.tif")
    options = {"classes": {"tumor": 3}, "image": str(tmp_path / "case.tif")}
    assert _mask(tmp_path, options, _feature("tumor", _polygon(_box(0, 0, 2, 2)))).shape == (5, 12)
    with pytest.raises(InvalidInput, match="shape"):
        _mask(tmp_path, {"classes": {"tumor": 3}})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"type": "Feature"}', "FeatureCollection"),
        (json.dumps({"features": [_feature("tumor", _polygon([[1, 2, 3]]))]}), "pairs"),
        ('{"features": [{"properties": {"name": 7}}]}', "class name"),
    ],
)
def test_unreadable_geojson_raises_data_unreadable_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    source = tmp_path / "broken.geojson"
    source.write_text(text)
    with pytest.raises(DataUnreadable, match=message) as caught:
        convert("geojson_to_label_mask", source, tmp_path / "out.tif", TISSUE)
    assert "broken.geojson" in str(caught.value)


def test_nuclei_json_maps_classes_keeps_unmapped_names_and_writes_exterior_rings(tmp_path: Path) -> None:
    source = _geojson(
        tmp_path / "c_nuclei.geojson",
        _feature("Nuclei_Lymphocytes", _polygon([[1, 2], [3, 2], [3, 4]], [[2, 2], [2, 3], [3, 3]])),
        _feature("nuclei_odd", _polygon([[5, 5], [6, 5], [6, 6]])),
        _feature("", _polygon([[5, 5], [6, 5], [6, 6]])),
        _feature("nuclei_tumor", {"type": "MultiPolygon", "coordinates": [[[[0, 0], [1, 0], [1, 1]]]]}),
        _feature("nuclei_tumor", _polygon([[0, 0], [1, 1]])),
    )
    target = tmp_path / "c_nuclei.json"
    convert("geojson_to_nuclei_json", source, target, {"classes": {"nuclei_lymphocytes": "TILs"}})
    assert json.loads(target.read_text()) == {
        "polygons": [
            {"name": "TILs", "path_points": [[1.0, 2.0], [3.0, 2.0], [3.0, 4.0]], "score": 1.0},
            {"name": "nuclei_odd", "path_points": [[5.0, 5.0], [6.0, 5.0], [6.0, 6.0]], "score": 1.0},
        ]
    }
    assert target.read_text().startswith('{\n  "polygons": [\n    {\n      "name": "TILs"')


def test_nuclei_json_drops_unmapped_classes_when_asked(tmp_path: Path) -> None:
    source = _geojson(tmp_path / "c.geojson", _feature("nuclei_odd", _polygon([[5, 5], [6, 5], [6, 6]])))
    convert("geojson_to_nuclei_json", source, tmp_path / "c.json", {"classes": {"a": "b"}, "unmapped": "skip"})
    assert json.loads((tmp_path / "c.json").read_text()) == {"polygons": []}


def test_box_txt_becomes_size_and_location_from_lines_two_and_three(tmp_path: Path) -> None:
    source = tmp_path / "topcow_ct_001.txt"
    source.write_text("ElementSpacing = 0.488281 0.488281 0.8\r\nSize = 179 143 85\r\nOrigin = 98 158 104\r\n")
    convert("box_txt_to_json", source, tmp_path / "box.json", {})
    text = (tmp_path / "box.json").read_text()
    assert json.loads(text) == {"size": [179, 143, 85], "location": [98, 158, 104]}
    assert list(json.loads(text)) == ["size", "location"] and text == json.dumps(json.loads(text), indent=2)


@pytest.mark.parametrize(
    ("text", "message"),
    [("Spacing = 1 1 1\nSize = 4 5 6\n", "line 3"), ("Spacing = 1\nSize = 4 5\nOrigin = 1 2 3\n", "expected 3")],
)
def test_box_txt_without_three_integers_per_line_is_unreadable(tmp_path: Path, text: str, message: str) -> None:
    source = tmp_path / "box.txt"
    source.write_text(text)
    with pytest.raises(DataUnreadable, match=message):
        convert("box_txt_to_json", source, tmp_path / "box.json", {})


def test_unknown_adapters_and_options_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="geojson_to_label_mask"):
        convert("png_to_mask", tmp_path / "a", tmp_path / "b", {})
    with pytest.raises(InvalidInput, match=r"options\.colour"):
        convert("box_txt_to_json", tmp_path / "a", tmp_path / "b", {"colour": 1})
    with pytest.raises(InvalidInput, match=r"options\.classes\.tumor"):
        ADAPTERS["geojson_to_label_mask"].parse_options({"classes": {"tumor": 256}})
    with pytest.raises(InvalidInput, match="lower case"):
        ADAPTERS["geojson_to_nuclei_json"].parse_options({"classes": {"Tumor": "tumor"}})


def test_shipped_label_adapter_table_validates_and_names_the_six_converting_challenges() -> None:
    table = label_adapters()
    assert sorted(table) == sorted(
        f"{family}-track{track}-task{task}"
        for family, task in (("puma", 1), ("puma", 2), ("topcow", 2))
        for track in (1, 2)
    )
    for columns in table.values():
        for entry in columns.values():
            ADAPTERS[entry.adapter].parse_options(entry.options)
            assert "{case}" in entry.train_label
    assert table["puma-track1-task2"]["label_path"].options["classes"]["nuclei_plasma_cells"] == "TILs"


def test_a_label_adapter_entry_with_a_bad_option_fails_naming_the_field(tmp_path: Path) -> None:
    entry = {"adapter": "box_txt_to_json", "train_label": "train/labels/{case}.txt", "options": {"lines": 2}}
    path = tmp_path / "adapters.yaml"
    path.write_text(yaml.safe_dump({"topcow-x": {"label_path": entry}}))
    with pytest.raises(DataUnreadable, match=r"topcow-x\.label_path.*options\.lines"):
        label_adapters(path)
