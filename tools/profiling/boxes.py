"""Detection supervision from a COCO-style box file: boxes per image, categories, object sizes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.inputs import ProfileCase, ProfileRequest
from amid.tools.profiling.models import ProfileIssue, Stats, capped, top_counts
from amid.tools.profiling.tables import CocoBox, CocoBoxes

# COCO's own size classes, in pixels of box area: small < 32^2 <= medium < 96^2 <= large.
COCO_SMALL_AREA = 32**2
COCO_LARGE_AREA = 96**2
# Half a pixel of slack: box corners at the far pixel edge are inside the image.
EDGE_SLACK_PX = 0.5


class BoxSummary(BaseModel):
    n_boxes: int
    images_in_file: int
    images_matched: int
    unmatched_images: list[str]
    n_unmatched_images: int
    cases_without_boxes: int
    boxes_per_image: Stats | None
    categories: dict[str, int]
    width_px: Stats | None
    height_px: Stats | None
    relative_area: Stats | None
    small_fraction: float
    medium_fraction: float
    large_fraction: float
    outside_image: int


def _case_keys(case: ProfileCase) -> list[str]:
    name = Path(case.image_paths[0]).name
    return [case.image_paths[0], name, name.split(".")[0], case.case_id]


def match_images(coco: CocoBoxes, cases: list[ProfileCase]) -> dict[str, ProfileCase]:
    """COCO image id -> case, matching file_name to a case's path, file name, stem or case id."""
    by_key: dict[str, ProfileCase] = {}
    for case in cases:
        for key in _case_keys(case):
            by_key.setdefault(key, case)
    matched: dict[str, ProfileCase] = {}
    for image in coco.images:
        name = Path(image.file_name).name
        found = by_key.get(image.file_name) or by_key.get(name) or by_key.get(name.split(".")[0])
        if found is not None:
            matched[str(image.id)] = found
    return matched


def _image_size(coco_size: tuple[int | None, int | None], result: CaseResult | None) -> tuple[float, float] | None:
    width, height = coco_size
    if width and height:
        return float(width), float(height)
    if result is not None and result.header is not None and len(result.header.shape) >= 2:
        return float(result.header.shape[1]), float(result.header.shape[0])  # 2-D images are (rows, columns)
    return None


def _outside(box: CocoBox, size: tuple[float, float] | None) -> bool:
    x, y, w, h = box.bbox
    if w <= 0 or h <= 0:
        return True
    if size is None:
        return False
    return (
        x < -EDGE_SLACK_PX or y < -EDGE_SLACK_PX or x + w > size[0] + EDGE_SLACK_PX or y + h > size[1] + EDGE_SLACK_PX
    )


@dataclass
class _Tally:
    """Boxes counted per case, and the sizes of every matched box."""

    per_case: Counter[str] = field(default_factory=Counter)
    outside: Counter[str] = field(default_factory=Counter)
    widths: list[float] = field(default_factory=list)
    heights: list[float] = field(default_factory=list)
    relative: list[float] = field(default_factory=list)


def _tally(coco: CocoBoxes, matched: dict[str, ProfileCase], results: dict[str, CaseResult]) -> _Tally:
    sizes = {str(i.id): (i.width, i.height) for i in coco.images}
    tally = _Tally()
    for box in coco.annotations:
        case = matched.get(str(box.image_id))
        if case is None:
            continue
        size = _image_size(sizes.get(str(box.image_id), (None, None)), results.get(case.case_id))
        tally.per_case[case.case_id] += 1
        tally.outside[case.case_id] += _outside(box, size)
        tally.widths.append(box.bbox[2])
        tally.heights.append(box.bbox[3])
        if size is not None:
            tally.relative.append(box.bbox[2] * box.bbox[3] / (size[0] * size[1]))
    return tally


def _issues(path: str | None, outside: Counter[str], unmatched: list[str]) -> list[ProfileIssue]:
    issues = [
        ProfileIssue(
            code="box_outside_image",
            severity="warning",
            case_id=case_id,
            path=path,
            message=f"{count} box(es) reach outside the image or have no area",
        )
        for case_id, count in outside.items()
        if count
    ]
    if unmatched:
        message = f"{len(unmatched)} image(s) in the box file match no case, e.g. {unmatched[:3]}"
        issues.append(ProfileIssue(code="unmatched_annotation_image", severity="warning", path=path, message=message))
    return issues


def summarize_boxes(
    request: ProfileRequest, coco: CocoBoxes, results: dict[str, CaseResult]
) -> tuple[BoxSummary, dict[str, int], list[ProfileIssue]]:
    """The box summary, boxes per case id, and issues (boxes outside their image, unknown images)."""
    matched = match_images(coco, request.cases)
    tally = _tally(coco, matched, results)
    areas = [w * h for w, h in zip(tally.widths, tally.heights, strict=True)]
    n = max(len(areas), 1)
    unmatched = [i.file_name for i in coco.images if str(i.id) not in matched]
    names = coco.category_names()
    summary = BoxSummary(
        n_boxes=len(areas),
        images_in_file=len(coco.images),
        images_matched=len(matched),
        unmatched_images=capped(unmatched),
        n_unmatched_images=len(unmatched),
        cases_without_boxes=sum(c.split == "train" and tally.per_case[c.case_id] == 0 for c in request.cases),
        boxes_per_image=Stats.of(tally.per_case[c.case_id] for c in matched.values()),
        categories=top_counts(Counter(names.get(str(b.category_id), str(b.category_id)) for b in coco.annotations)),
        width_px=Stats.of(tally.widths),
        height_px=Stats.of(tally.heights),
        relative_area=Stats.of(tally.relative),
        small_fraction=sum(a < COCO_SMALL_AREA for a in areas) / n,
        medium_fraction=sum(COCO_SMALL_AREA <= a < COCO_LARGE_AREA for a in areas) / n,
        large_fraction=sum(a >= COCO_LARGE_AREA for a in areas) / n,
        outside_image=sum(tally.outside.values()),
    )
    return summary, dict(tally.per_case), _issues(request.boxes_json, tally.outside, unmatched)
