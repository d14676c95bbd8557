"""The demo's model file: what the scripted workers write into their worktrees as `threshold_model.py`.

An intensity-threshold segmentation of the demo task (organ above a fitted threshold, lesions as the
darker holes in it), trained and applied through `run_gpu_job` and replayed by the reviewer. It is a
file's text, not a module of AMID: the workers' code, run as the agents' own. The real-CLI worker tests
have their agents write the same file, and `benchmarks/stability_sweep.py` runs it over many seeds.
"""

from __future__ import annotations

MODEL_PY = '''\
"""Intensity-threshold segmentation: fit on training cases, predict label maps in the reference geometry.

    python threshold_model.py train TASK_DIR FOLDS_JSON FOLD OUT_DIR
    python threshold_model.py predict MODEL_JSON INPUT_DIR OUTPUT_DIR
"""
import json
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage


def smooth(path):
    image = nib.load(path)
    return image, ndimage.gaussian_filter(np.asarray(image.dataobj, dtype=float), 1.0)


def train(task_dir, folds_json, fold, out):
    folds = json.loads(Path(folds_json).read_text(encoding="utf-8"))
    cases = folds["folds"][fold]["train_cases"]
    samples = {0: [], 1: [], 2: []}
    for case in cases:
        _, volume = smooth(Path(task_dir) / "public/train/images" / f"{case}_0000.nii.gz")
        label = np.asarray(nib.load(Path(task_dir) / "public/train/labels" / f"{case}.nii.gz").dataobj)
        body = volume > -500
        for value in samples:
            mask = (label == value) & body
            samples[value].append(float(np.median(volume[mask])))
    medians = {value: float(np.median(found)) for value, found in samples.items()}
    model = {"organ_min": (medians[0] + medians[1]) / 2, "lesion_max": (medians[1] + medians[2]) / 2,
             "lesion_min": medians[2] - (medians[1] - medians[2]), "medians": medians}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "model.json").write_text(json.dumps(model, indent=1), encoding="utf-8")
    (Path(out) / "manifest.json").write_text(json.dumps({"folds": {str(fold): cases}}), encoding="utf-8")
    print(f"fold {fold}: fitted on {len(cases)} cases: {model}")


def predict(model_json, source, target):
    model = json.loads(Path(model_json).read_text(encoding="utf-8"))
    Path(target).mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(source).glob("*_0000.nii.gz")):
        image, volume = smooth(path)
        organ = ndimage.binary_opening(volume > model["organ_min"])
        # lesions are darker than the organ: holes in its mask, filled slice by slice
        filled = np.stack([ndimage.binary_fill_holes(organ[..., z]) for z in range(volume.shape[-1])], -1)
        lesion = filled & ~organ & (volume > model["lesion_min"]) & (volume <= model["lesion_max"])
        label = np.zeros(volume.shape, np.uint8)
        label[filled] = 1
        label[ndimage.binary_opening(lesion)] = 2
        name = path.name[: -len("_0000.nii.gz")] + ".nii.gz"
        nib.save(nib.Nifti1Image(label, image.affine, image.header), Path(target) / name)
        print(f"predicted {name}")


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        predict(sys.argv[2], sys.argv[3], sys.argv[4])
'''
