"""Check AMID's label adapters against the files ReX-MLE's own prepare.py wrote.

For every challenge in registry/benchmarks/rexmle_label_adapters.yaml and every test case of its
prepared data, the case's raw label (the file prepare.py converted; it lies in the raw folder, not
in prepared/) goes through the adapter, and the result is compared with prepare.py's answers file:
JSON files must be byte-equal, rasters pixel-identical (their bytes are compared too, for the record).

    .venv/bin/python benchmarks/rexmle/check_label_adapters.py DATA_DIR [CHALLENGE_ID ...]

DATA_DIR holds `<id>/prepared/{public,private}` and the raw data (`<id>/raw`, or the shared
`<family>-shared/raw` that PUMA and TopCoW read). Prints one row per challenge; exits 1 on any mismatch.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from amid.registry.loader import label_adapters  # noqa: E402
from amid.registry.schemas import LabelAdapterEntry  # noqa: E402
from amid.tools.task.label_adapters import convert  # noqa: E402

RASTER_ENDINGS = (".tif", ".tiff", ".png")


@dataclass
class Outcome:
    challenge: str
    column: str
    adapter: str
    cases: int = 0
    equal: int = 0
    bytes_equal: int = 0
    problems: list[str] = field(default_factory=list)


def rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def raw_label(data_dir: Path, challenge: str, name: str) -> Path | None:
    """The raw file `name` under the challenge's raw folder or its family's shared one."""
    family = challenge.split("-")[0]
    for folder in (data_dir / challenge / "raw", data_dir / f"{family}-shared" / "raw"):
        found = sorted(folder.rglob(name)) if folder.is_dir() else []
        if found:
            return found[0]
    return None


def same(produced: Path, expected: Path) -> tuple[bool, bool]:
    """(content equal, bytes equal): rasters by their label arrays, everything else by bytes."""
    bytes_equal = produced.read_bytes() == expected.read_bytes()
    if expected.suffix.lower() not in RASTER_ENDINGS:
        return bytes_equal, bytes_equal
    with Image.open(produced) as ours, Image.open(expected) as theirs:
        ours_array, theirs_array = np.asarray(ours), np.asarray(theirs)
    content = ours_array.shape == theirs_array.shape and ours_array.dtype == theirs_array.dtype
    return content and bool(np.array_equal(ours_array, theirs_array)), bytes_equal


def check_case(outcome: Outcome, entry: LabelAdapterEntry, data_dir: Path, case: str, expected: Path) -> None:
    name = PurePosixPath(entry.train_label.replace("{case}", case)).name
    source = raw_label(data_dir, outcome.challenge, name)
    if source is None:
        outcome.problems.append(f"{case}: raw label {name} not found")
        return
    with tempfile.TemporaryDirectory() as scratch:
        produced = Path(scratch) / expected.name
        convert(entry.adapter, source, produced, entry.options)
        content, exact = same(produced, expected)
    outcome.equal += content
    outcome.bytes_equal += exact
    if not content:
        outcome.problems.append(f"{case}: {expected.name} differs")


def check(data_dir: Path, challenge: str, column: str, entry: LabelAdapterEntry) -> Outcome:
    outcome = Outcome(challenge, column, entry.adapter)
    prepared = data_dir / challenge / "prepared"
    answers = prepared / "private" / "test_labels.csv"
    if not answers.is_file():
        outcome.problems.append(f"no prepared data ({answers} missing)")
        return outcome
    sample_header, _ = rows(prepared / "public" / "sample_submission.csv")
    _, answer_rows = rows(answers)
    for row in answer_rows:
        outcome.cases += 1
        check_case(outcome, entry, data_dir, row[sample_header[0]], prepared / "private" / row[column])
    return outcome


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[6].strip(), file=sys.stderr)
        return 2
    data_dir, only = Path(argv[0]), set(argv[1:])
    table = label_adapters()
    outcomes = [
        check(data_dir, challenge, column, entry)
        for challenge, columns in table.items()
        if not only or challenge in only
        for column, entry in columns.items()
    ]
    print(f"{'challenge':<22}{'column':<12}{'adapter':<24}{'cases':>6}{'equal':>7}{'bytes=':>8}  result")
    for o in outcomes:
        verdict = "ok" if o.cases and not o.problems else "; ".join(o.problems) or "no cases"
        print(f"{o.challenge:<22}{o.column:<12}{o.adapter:<24}{o.cases:>6}{o.equal:>7}{o.bytes_equal:>8}  {verdict}")
    return 0 if all(o.cases and not o.problems for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
