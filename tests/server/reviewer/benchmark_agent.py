"""A scripted agent for ReX-MLE tasks (fixtures of tests/fixtures/rexmle.py): validation predictions
laid out like a test submission (submission.csv with the fold's cases, the files it names, named as
the sample submission names them), test submissions built from the private answers, and a committed
"model" whose checkpoint memorises its outputs, declared as the inference command to replay.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk
import yaml

from amid.server.workspace import Workspace
from tests.fixtures.rexmle import SPECS
from tests.server.reviewer.sandbox import AgentSandbox

# Replays by writing, into {output_dir}, the submission of the cases it is given (submission.csv and
# the files it names) from the one its checkpoint memorised: reproducible from commit and checkpoint.
# A case is given when an input file is named after it (`CASE_0000.nii.gz`, `topcow_ct_CASE_0000…`).
MEMORY_PY = """\
import csv
import re
import shutil
import sys
from pathlib import Path

source, target, memory = (Path(a) for a in sys.argv[1:4])
names = [p.name for p in source.iterdir()]
with (memory / "submission.csv").open(encoding="utf-8") as handle:
    header, *rows = list(csv.reader(handle))
kept = [r for r in rows if any(re.search(rf"(^|_){re.escape(r[0])}([._]|$)", n) for n in names)]
target.mkdir(parents=True, exist_ok=True)
with (target / "submission.csv").open("w", encoding="utf-8", newline="") as handle:
    csv.writer(handle).writerows([header, *kept])
for row in kept:
    for value in row[1:]:
        if (memory / value).is_file():
            (target / value).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(memory / value, target / value)
"""
REPLAY = ["{python}", "predict.py", "{input_dir}", "{output_dir}", "{checkpoint}"]


class BenchmarkAgent(AgentSandbox):
    def __init__(self, workspace: Workspace, agent_id: str, challenge_id: str, data_dir: Path) -> None:
        super().__init__(workspace, agent_id)
        self.spec = SPECS[challenge_id]
        self.prepared = data_dir / challenge_id / "prepared"
        self.id_column, self.pred_column, self.label_column = self.spec.columns
        with (workspace.task_dir / str(self.contract.submission.sample_submission)).open(encoding="utf-8") as handle:
            self.sample = next(csv.DictReader(handle))

    def fold_by_size(self, rank: int = 0) -> int:
        """The fold with the `rank`-th most validation cases (a correlation needs two)."""
        return sorted(range(self.folds.k), key=lambda f: (-len(self.folds.val_cases(f)), f))[rank]

    def commit_model(self) -> str:
        return self.commit({"predict.py": MEMORY_PY}, message="memorising model")

    # ----------------------------------------------------------------- predictions

    def perfect_fold(self, fold: int, folder: str) -> str:
        """The fold's training labels, in the prediction format, as a submission folder."""
        cases = self.folds.val_cases(fold)
        if self.spec.kind == "table":
            return self._folder(folder, {}, self._train_values(cases))
        return self._folder(folder, {c: self._train_answer(c) for c in cases}, {})

    def trivial_fold(self, fold: int, folder: str) -> str:
        """Empty masks / blank images / the training mean / one training case's edges for every case."""
        cases = self.folds.val_cases(fold)
        if self.spec.kind == "table":
            mean = float(np.mean([float(v) for v in self._train_table().values()]))
            return self._folder(folder, {}, dict.fromkeys(cases, f"{mean:.6f}"))
        donor = self.folds.folds[fold].train_cases[0]
        files = {c: (self._train_answer(donor) if self.spec.kind == "edges" else self._blank(c)) for c in cases}
        return self._folder(folder, files, {})

    def test_submission(self, folder: str, broken: bool = False) -> str:
        """The private answers as a submission; `broken`: the first case's file or value unusable."""
        with (self.prepared / "private/test_labels.csv").open(encoding="utf-8") as handle:
            answers = {row[self.id_column]: row for row in csv.DictReader(handle)}
        if self.spec.kind == "table":
            values = {c: row[self.label_column] for c, row in answers.items()}
            return self._folder(folder, {}, {**values, next(iter(values)): "high"} if broken else values)
        files = {c: self._converted(self.prepared / "private" / row[self.label_column]) for c, row in answers.items()}
        if broken:
            files[next(iter(files))] = self._unusable()
        return self._folder(folder, files, {})

    def memorised_checkpoint(self, predictions: str, rel: str) -> str:
        """A checkpoint that memorises a predictions folder (submission.csv and its files)."""
        shutil.copytree(self.path(predictions), self.path(rel), dirs_exist_ok=True)
        return rel

    def payload(self, commit: str, fold: int, folder: str, **overrides: Any) -> dict[str, Any]:
        artifacts = {
            "predictions": {str(fold): folder},
            "training_manifest": self.honest_manifest([fold], f"outputs/manifest-{folder.replace('/', '-')}.json"),
            **self.write_evidence(folder.replace("/", "-")),
            **overrides.pop("artifacts", {}),
        }
        declared = {self.contract.primary_metric: overrides.pop("primary")}
        return {
            "commit": commit,
            "folds": [fold],
            "declared_scores": {str(fold): declared},
            "artifacts": artifacts,
            **overrides,
        }

    # ----------------------------------------------------------------- files

    def _folder(self, folder: str, files: dict[str, bytes], values: dict[str, str]) -> str:
        """submission.csv (the sample's columns) and the files, under the worktree's `folder`."""
        rows = []
        for case in files or values:
            row = {**self.sample, self.id_column: case}
            if files:
                rel = self._named_like_sample(case)
                self.path(f"{folder}/{rel}").write_bytes(files[case])
                row[self.pred_column] = rel
            else:
                row[self.pred_column] = values[case]
            rows.append(row)
        self._write_csv(self.path(f"{folder}/submission.csv"), list(self.sample), [list(r.values()) for r in rows])
        return folder

    def _named_like_sample(self, case: str) -> str:
        return self.sample[self.pred_column].replace(self.sample[self.id_column], case, 1)

    def _train_answer(self, case: str) -> bytes:
        if self.spec.kind == "coco":  # no label file per case: the training images' one COCO file
            grader = self.contract.grader
            assert grader is not None and grader.fold_answers is not None
            coco = next(str(c.train_source) for c in grader.fold_answers if c.kind == "coco_image")
            return json.dumps(self._coco_slice(self.workspace.task_dir / coco, case)).encode()
        return self._converted(self.workspace.task_dir / str(self.cases[case].label_path))

    def _converted(self, label: Path) -> bytes:
        """A label file as a prediction: edge YAML written as the JSON the sample asks for."""
        if self.spec.kind == "edges":
            return json.dumps(yaml.safe_load(label.read_text(encoding="utf-8"))).encode()
        return label.read_bytes()

    def _coco_slice(self, coco: Path, case: str) -> dict[str, Any]:
        data = json.loads(coco.read_text(encoding="utf-8"))
        image = next(i for i in data["images"] if i["file_name"] == f"{case}.png")
        return {"images": [image], "annotations": [a for a in data["annotations"] if a["image_id"] == image["id"]]}

    def _blank(self, case: str) -> bytes:
        label = self.workspace.task_dir / str(self.cases[case].label_path)
        return self._image_bytes(label, lambda array: np.zeros_like(array))

    def _unusable(self) -> bytes:
        if self.spec.kind == "edges":
            return json.dumps({"anterior": {}}).encode()  # no posterior edges at all
        label = next(self.workspace.task_dir / str(c.label_path) for c in self.cases.values())
        return self._image_bytes(label, lambda array: np.zeros(np.array(array.shape) + 1, array.dtype))

    def _image_bytes(self, reference: Path, change: Any) -> bytes:
        """The reference image's format and geometry, with `change` applied to its voxels."""
        image = sitk.ReadImage(str(reference))
        out = sitk.GetImageFromArray(change(sitk.GetArrayFromImage(image)))
        if out.GetSize() == image.GetSize():
            out.CopyInformation(image)
        scratch = self.path(f".scratch/{reference.name}")
        sitk.WriteImage(out, str(scratch))
        content = scratch.read_bytes()
        shutil.rmtree(scratch.parent)
        return content

    def _train_table(self) -> dict[str, str]:
        with (self.workspace.task_dir / str(self.contract.layout.labels_table)).open(encoding="utf-8") as handle:
            return {row[self.id_column]: row[self.label_column] for row in csv.DictReader(handle)}

    def _train_values(self, cases: list[str]) -> dict[str, str]:
        table = self._train_table()
        return {c: table[c] for c in cases}

    @staticmethod
    def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
