"""Label-format converters for benchmarks whose preparation converts only the test labels.

A benchmark such as ReX-MLE ships training labels in the annotation tool's format (GeoJSON, a
`.txt` box) while its grader reads the converted format its preparation wrote for the test cases.
To grade a validation fold with that grader, the fold's training labels go through the same
conversion. Each adapter is `adapter(source, target, options)`: it reads one label file, writes
one, and follows the benchmark's own conversion rule for rule, so that converting a test case's
raw label reproduces the file the benchmark wrote. `options` are validated by the adapter's
options model (bad options: InvalidInput); a caller may add `options["image"]`, the case's image,
to any adapter; a source that cannot be read raises DataUnreadable naming the file and the part.

GeoJSON (x, y) are pixel coordinates, x to the right and y down; as in PIL, the integer point
(x, y) is the pixel in column x, row y. Rasters are (height, width) arrays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from amid.server.errors import DataUnreadable, InvalidInput

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

Ring = list[tuple[float, float]]
LabelValue = Annotated[int, Field(ge=1, le=255)]  # uint8 raster; 0 is the background


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = Field(
        default=None, description="Path of the case's image, given per case by the caller; read for its size only."
    )


class _ClassOptions(_Options):
    classes: dict[str, Any]
    lowercase: bool

    @model_validator(mode="after")
    def _keys_can_match(self) -> _ClassOptions:
        unreachable = sorted(k for k in self.classes if self.lowercase and k != k.lower())
        if unreachable:
            raise ValueError(f"classes {unreachable} can never match lower-cased names; write them in lower case")
        return self


class MaskOptions(_ClassOptions):
    """geojson_to_label_mask: polygon features painted, in file order, onto a uint8 label raster."""

    classes: dict[str, LabelValue] = Field(min_length=1, description="Class name → label value; others skipped.")
    class_keys: list[str] = Field(
        default=["classification.name", "name"],
        min_length=1,
        description="Dotted paths under a feature's `properties`; the first non-empty one names its class.",
    )
    lowercase: bool = Field(default=True, description="Lower-case the class name before looking it up.")
    shape: tuple[int, int] | None = Field(
        default=None, description="Raster (height, width) in pixels; omitted: the case image's (`image`)."
    )
    holes: Literal["filled", "background"] = Field(
        default="filled",
        description="filled: interior rings are ignored (the whole exterior is painted); background: they are "
        "painted 0 after their exterior.",
    )


class NucleiOptions(_ClassOptions):
    """geojson_to_nuclei_json: polygon features → {"polygons": [{name, path_points, score}]}."""

    classes: dict[str, str] = Field(default_factory=dict, description="Class name → the name written.")
    class_keys: list[str] = Field(default=["classification.name"], min_length=1)
    lowercase: bool = True
    unmapped: Literal["keep", "skip"] = Field(
        default="keep", description="keep: a class missing from `classes` is written under its own name."
    )
    score: float = Field(default=1.0, description="The confidence written for every polygon.")


class BoxOptions(_Options):
    """box_txt_to_json: integers of given lines of a text file → {"size": [...], "location": [...]}."""

    fields: dict[str, int] = Field(
        default={"size": 1, "location": 2},
        min_length=1,
        description="JSON key → 0-based line whose whole-word integers it takes, in this key order.",
    )
    values_per_field: int | None = Field(default=3, ge=1, description="Integers each line must hold; None: any.")


@dataclass(frozen=True)
class Adapter:
    """One converter and the model its options must satisfy."""

    run: Callable[[Path, Path, Any], None]
    options_model: type[_Options]

    def __call__(self, source: Path, target: Path, options: dict[str, Any]) -> None:
        self.run(source, target, self.parse_options(options))

    def parse_options(self, options: dict[str, Any]) -> Any:
        try:
            return self.options_model.model_validate(options)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(options)"
            raise InvalidInput(f"options.{where}: {first['msg']} (got {first.get('input')!r:.120})") from None


def geojson_to_label_mask(source: Path, target: Path, options: MaskOptions) -> None:
    """Paint each Polygon/MultiPolygon feature of a known class; later features overwrite earlier ones."""
    from PIL import Image, ImageDraw  # here, not at import: the server's start needs only the schemas

    mask = Image.new("L", _raster_size(options))
    draw = ImageDraw.Draw(mask)
    for properties, geometry in _features(source):
        value = options.classes.get(_class_name(properties, options.class_keys, options.lowercase, source), 0)
        if not value:
            continue
        for exterior, interiors in _polygons(geometry, source):
            # Fill and outline both, as the benchmark draws them, so boundary pixels match in any Pillow.
            draw.polygon(exterior, fill=value, outline=value)
            for ring in interiors if options.holes == "background" else []:
                draw.polygon(ring, fill=0, outline=0)
    _save_raster(mask, target)


def geojson_to_nuclei_json(source: Path, target: Path, options: NucleiOptions) -> None:
    """One entry per Polygon feature (exterior ring only) with a class name; other geometries are skipped."""
    polygons: list[dict[str, Any]] = []
    for properties, geometry in _features(source):
        name = _class_name(properties, options.class_keys, options.lowercase, source)
        mapped = options.classes.get(name, name if options.unmapped == "keep" else "")
        if not mapped or geometry.get("type") != "Polygon":
            continue
        exterior = _rings((geometry.get("coordinates") or [])[:1], source)
        if exterior and len(exterior[0]) >= 3:
            points = [[x, y] for x, y in exterior[0]]
            polygons.append({"name": mapped, "path_points": points, "score": options.score})
    _write_json({"polygons": polygons}, target)


def box_txt_to_json(source: Path, target: Path, options: BoxOptions) -> None:
    """Each field is the list of whole-word integers on its line (`Size = 179 143 85` → [179, 143, 85])."""
    lines = _read_lines(source)
    box: dict[str, list[int]] = {}
    for key, line in options.fields.items():
        if line >= len(lines):
            raise DataUnreadable(f"{source.name}: field {key!r} is on line {line + 1}, the file has {len(lines)}")
        values = [int(v) for v in re.findall(r"\b\d+\b", lines[line])]
        if options.values_per_field is not None and len(values) != options.values_per_field:
            raise DataUnreadable(
                f"{source.name}: line {line + 1} ({lines[line].strip()!r}) holds {len(values)} integers for "
                f"{key!r}; expected {options.values_per_field}"
            )
        box[key] = values
    _write_json(box, target)


ADAPTERS: dict[str, Adapter] = {
    "geojson_to_label_mask": Adapter(geojson_to_label_mask, MaskOptions),
    "geojson_to_nuclei_json": Adapter(geojson_to_nuclei_json, NucleiOptions),
    "box_txt_to_json": Adapter(box_txt_to_json, BoxOptions),
}


def convert(name: str, source: Path, target: Path, options: dict[str, Any]) -> None:
    """Convert the label file `source` into `target` with the adapter `name`."""
    if name not in ADAPTERS:
        raise InvalidInput(f"adapter: got {name!r}; expected one of {sorted(ADAPTERS)}", field="adapter")
    ADAPTERS[name](source, target, options)


# ----------------------------------------------------------------------------- reading


def _read_text(source: Path) -> str:
    return "".join(_read_lines(source))


def _read_lines(source: Path) -> list[str]:
    """Lines split as `readlines` splits them (newline kept), so line numbers match the benchmark's."""
    try:
        with source.open(encoding="utf-8") as handle:
            return handle.readlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DataUnreadable(f"{source}: cannot be read as text ({error})") from None


def _features(source: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(properties, geometry) of each feature of a FeatureCollection, or of a bare list of features."""
    try:
        document = json.loads(_read_text(source))
    except json.JSONDecodeError as error:
        raise DataUnreadable(f"{source.name}: not JSON ({error})") from None
    features = document.get("features") if isinstance(document, dict) else document
    if not isinstance(features, list):
        raise DataUnreadable(f"{source.name}: expected a GeoJSON FeatureCollection (a 'features' list)")
    for index, feature in enumerate(features):
        if not isinstance(feature, dict):
            raise DataUnreadable(f"{source.name}: feature {index} is a {type(feature).__name__}, not an object")
        yield feature.get("properties") or {}, feature.get("geometry") or {}


def _class_name(properties: dict[str, Any], keys: list[str], lowercase: bool, source: Path) -> str:
    for key in keys:
        value: Any = properties
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, str):
            raise DataUnreadable(f"{source.name}: properties.{key} is {value!r}; expected a class name string")
        if value:
            return value.lower() if lowercase else value
    return ""


def _polygons(geometry: dict[str, Any], source: Path) -> Iterator[tuple[Ring, list[Ring]]]:
    """(exterior, interiors) of each polygon of a Polygon or MultiPolygon; exteriors of under 3 points skipped."""
    kind = geometry.get("type")
    if kind not in ("Polygon", "MultiPolygon"):
        return
    coordinates = geometry.get("coordinates") or []
    for polygon in [coordinates] if kind == "Polygon" else coordinates:
        rings = _rings(polygon, source)
        if rings and len(rings[0]) >= 3:
            yield rings[0], rings[1:]


def _rings(polygon: Any, source: Path) -> list[Ring]:
    try:
        return [[(float(x), float(y)) for x, y in ring] for ring in polygon or []]
    except (TypeError, ValueError):
        raise DataUnreadable(
            f"{source.name}: polygon coordinates are not rings of [x, y] pairs: {polygon!r:.120}"
        ) from None


def _raster_size(options: MaskOptions) -> tuple[int, int]:
    """(width, height), as PIL takes it."""
    if options.shape is not None:
        height, width = options.shape
        return width, height
    if options.image is None:
        raise InvalidInput("options.shape: not given, and no options.image to take the size from", field="shape")
    from PIL import Image

    try:
        with Image.open(options.image) as image:
            return image.size
    except (OSError, ValueError) as error:
        raise DataUnreadable(f"{options.image}: cannot read the image's size ({error})") from None


# ----------------------------------------------------------------------------- writing


def _save_raster(mask: PILImage, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mask.save(target)
    except ValueError as error:  # PIL picks the format by the file ending
        raise InvalidInput(f"target: {target.name} has no raster ending PIL can write ({error})") from None


def _write_json(document: dict[str, Any], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2), encoding="utf-8")
