"""Which folder of a prepared benchmark task holds the images of a split, found from the case ids.

Benchmarks name their image folders freely (`train/`, `train/images/`, `train_images/`,
`jpeg/train/`, `stage_2_train_images/`); what is certain is that an image's file name, less its
ending, is the case id the grader's answers use. So a split's image folder is the folder under
public/ whose image files have every id of that split as a stem. When several do (the same images
as DICOM and as JPEG), one named `images/` wins, then the shallowest, then by name; a folder of labels never
counts. Failing that, a split's cases may be folders named by their ids (DICOM series, one per case
or one per sequence). When nothing fits, the error says which ids were looked for and what the
closest folders hold.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from amid.server.errors import InvalidInput

IMAGE_ENDINGS = (
    ".nii.gz",
    ".nii",
    ".mha",
    ".mhd",
    ".nrrd",
    ".png",
    ".jpg",
    ".jpeg",
    ".tiff",
    ".tif",
    ".bmp",
    ".dcm",
    ".dicom",
)
MAX_FOLDERS = 5000  # a prepared folder with more holds something other than one image folder per split


def image_stems(folder: Path) -> dict[str, str]:
    """Stem → ending of the image files directly in `folder` (dotted ids such as DICOM UIDs kept whole)."""
    stems: dict[str, str] = {}
    for path in folder.iterdir():
        lower = path.name.lower()
        ending = next((e for e in IMAGE_ENDINGS if lower.endswith(e)), None)
        if ending is not None and not path.name.startswith(".") and path.is_file():
            stems.setdefault(path.name[: -len(ending)], path.name[-len(ending) :])
    return stems


def image_folders(public: Path) -> dict[Path, dict[str, str]]:
    """Every folder under public/ (public/ included) that holds image files, with their stems."""
    found: dict[Path, dict[str, str]] = {}
    folders = [public, *sorted(p for p in public.rglob("*") if p.is_dir())]
    if len(folders) > MAX_FOLDERS:
        raise InvalidInput(
            f"public/ holds {len(folders)} folders (more than {MAX_FOLDERS}); cannot tell which holds the images",
            field="layout",
        )
    for folder in folders:
        stems = image_stems(folder)
        if stems:
            found[folder] = stems
    return found


def split_image_template(
    task_dir: Path, public: str, split: str, case_ids: list[str], skip: str | None, required: bool = True
) -> str:
    """`public/<folder>/{case}<ending>` for the folder holding an image of every case of the split.
    `skip`: the labels' folder (relative to task_dir). Not `required`: '' when no folder holds any."""
    root = task_dir / public
    folders = {f: s for f, s in image_folders(root).items() if _may_hold_images(f, task_dir, skip)}
    wanted = set(case_ids)
    covering = [f for f, stems in folders.items() if wanted <= stems.keys()]
    if covering:
        folder = min(covering, key=lambda f: _preference(f, root))
        endings = {folders[folder][c] for c in wanted}
        rel = folder.relative_to(task_dir).as_posix()
        return f"{rel}/{{case}}{endings.pop() if len(endings) == 1 else '{ext}'}"
    if not required and not any(wanted & s.keys() for s in folders.values()):
        return ""
    raise InvalidInput(_nothing_fits(root, split, case_ids, folders), field="layout")


def split_images(
    task_dir: Path, public: str, split: str, case_ids: list[str], skip: str | None, required: bool = True
) -> tuple[list[str], list[str]]:
    """The split's image templates and channel names: one file per case, or else (as the RSNA
    competitions ship DICOM) one folder per case named by its id, holding the series itself
    (`train/{case}`) or one series folder per sequence that every case has (`train/{case}/FLAIR`)."""
    try:
        template = split_image_template(task_dir, public, split, case_ids, skip, required)
    except InvalidInput:
        series = _series_templates(task_dir, public, case_ids)
        if series is None:
            raise
        return series
    if template:
        return [template], ["image"]
    return _series_templates(task_dir, public, case_ids) or ([], ["image"])


def _series_templates(task_dir: Path, public: str, case_ids: list[str]) -> tuple[list[str], list[str]] | None:
    wanted = set(case_ids)
    for folder in sorted(p for p in [task_dir / public, *(task_dir / public).rglob("*")] if p.is_dir()):
        if not wanted or not wanted <= {c.name for c in folder.iterdir() if c.is_dir()}:
            continue
        rel = folder.relative_to(task_dir).as_posix()
        cases = [folder / c for c in sorted(wanted)]
        if all(any(f.is_file() for f in c.iterdir()) for c in cases):
            return [f"{rel}/{{case}}"], ["image"]
        sequences = {c.name: {s.name for s in c.iterdir() if s.is_dir()} for c in cases}
        common = set.union(*sequences.values())
        odd = next((case for case, names in sequences.items() if names != common), None)
        if odd is not None:  # a channel missing from some cases is refused, never dropped for all
            raise InvalidInput(
                f"{rel}/{odd}/: its series folders {sorted(sequences[odd])} lack "
                f"{sorted(common - sequences[odd])}, which other cases have; each case needs the same sequences "
                "(channels)",
                field="layout",
            )
        if common:
            return [f"{rel}/{{case}}/{s}" for s in sorted(common)], sorted(common)
    return None


def _may_hold_images(folder: Path, task_dir: Path, skip: str | None) -> bool:
    rel = folder.relative_to(task_dir).as_posix()
    return rel != skip and "label" not in folder.name.lower() and "mask" not in folder.name.lower()


def _preference(folder: Path, root: Path) -> tuple[int, int, str]:
    rel = PurePosixPath(folder.relative_to(root).as_posix())
    return (0 if folder.name == "images" else 1, len(rel.parts), str(rel))


def _nothing_fits(root: Path, split: str, case_ids: list[str], folders: dict[Path, dict[str, str]]) -> str:
    wanted = set(case_ids)
    closest = sorted(folders.items(), key=lambda item: -len(wanted & item[1].keys()))[:3]
    seen = "; ".join(
        f"{f.relative_to(root.parent).as_posix()}/ has {len(wanted & s.keys())} of them among {len(s)} images"
        for f, s in closest
    )
    missing = sorted(wanted - closest[0][1].keys())[:3] if closest else sorted(wanted)[:3]
    return (
        f"public/: no folder holds an image file named by every {split} case id ({len(case_ids)} ids such as "
        f"{sorted(wanted)[:3]}, looked for as <id> plus one of {', '.join(IMAGE_ENDINGS)}); "
        f"{seen or 'no folder under public/ holds image files'}; missing e.g. {missing}. A task whose case is "
        "a folder of files (a DICOM series) or whose ids name no file needs its layout in the contract"
    )
