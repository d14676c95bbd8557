"""Training-manifest entries become case ids: ids, file names and paths of a case's files; anything
else is reported by name."""

from __future__ import annotations

from amid.server.reviewer.manifest import CaseIndex, resolve_entries
from amid.tools.task.cases import Case
from amid.tools.task.contract import DataLayout

LAYOUT = DataLayout(train_images="public/train/images", train_labels="public/train/labels")


def case(case_id: str, folder: str = "public/train") -> Case:
    return Case(
        case_id=case_id,
        split="train",
        image_paths=(f"{folder}/images/{case_id}_0000.nii.gz",),
        label_path=f"{folder}/labels/{case_id}.nii.gz",
    )


def test_ids_file_names_and_paths_map_to_their_case() -> None:
    index = CaseIndex.of([case("p03_a"), case("p03_b"), case("p04_a")], LAYOUT)
    entries = {
        0: [
            "p03_a",
            "p03_b_0000.nii.gz",
            "task/public/train/images/p04_a_0000.nii.gz",
            "/ws/task/public/train/labels/p03_a.nii.gz",
            "data/p04_a_0000",
        ]
    }
    assert resolve_entries(entries, index) == ({0: ["p03_a", "p03_b", "p04_a"]}, [])


def test_shared_file_names_resolve_by_path_and_unknown_entries_are_named() -> None:
    shared = [Case(case_id=c, split="train", image_paths=(f"cases/{c}/image.nii.gz",)) for c in ("s1", "s2")]
    index = CaseIndex.of(shared, LAYOUT)
    entries = {1: ["/abs/task/cases/s2/image.nii.gz", "image.nii.gz", "s1", "p99_0000.nii.gz", "s1"]}
    resolved, unknown = resolve_entries(entries, index)
    assert resolved == {1: ["s2", "s1"]} and unknown == ["image.nii.gz", "p99_0000.nii.gz"]
