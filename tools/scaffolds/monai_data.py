"""Cases, transforms and prediction writing of the MONAI scaffold.

Images are read on their own voxel axes (no reorientation, so the profile's spacing order holds),
resampled to the configured spacing, normalised as configured; predictions are mapped back with
MONAI's `Invertd` and written with the reference image's exact header (NIfTI) or size (PNG).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from amid.server.errors import InvalidInput
from amid.tools.scaffolds.monai_config import MonaiConfig
from amid.tools.scaffolds.taskdata import TaskData

Item = dict[str, Any]


def items(task: TaskData, case_ids: list[str], *, with_label: bool) -> list[Item]:
    """MONAI data dicts: `image` (one path per channel), `label` (mask or target image), `case_id`."""
    found = []
    for case_id in case_ids:
        case = task.train_cases.get(case_id) or task.test_cases.get(case_id)
        if case is None:
            raise InvalidInput(f"case {case_id!r}: not among the task's public cases", field="cases")
        item: Item = {"image": [str(task.path(p)) for p in case.image_paths], "case_id": case_id}
        if with_label:
            if case.label_path is None:
                raise InvalidInput(f"case {case_id!r}: has no label file", field="cases")
            item["label"] = str(task.path(case.label_path))
        found.append(item)
    return found


CHANNEL_FILE = re.compile(r"^(?P<case>.+)_(?P<channel>\d{4})(?P<ending>\.nii\.gz|\.nii|\.png|\.nrrd|\.mha)$")


def items_from_folder(folder: Path) -> tuple[list[Item], str]:
    """Data dicts for every case in a folder of `CASE_0000<ending>` files (holdout replay), and the ending."""
    cases: dict[str, dict[int, str]] = defaultdict(dict)
    endings = set()
    for path in sorted(folder.iterdir()):
        match = CHANNEL_FILE.match(path.name)
        if match:
            cases[match["case"]][int(match["channel"])] = str(path)
            endings.add(match["ending"])
    if not cases or len(endings) != 1:
        raise InvalidInput(f"input_dir: expected CASE_0000<ending> files of one type in {folder}", field="input_dir")
    found = [{"image": [files[c] for c in sorted(files)], "case_id": case} for case, files in sorted(cases.items())]
    return found, endings.pop()


def _reader(path: str) -> Any:
    from monai.data import NibabelReader, PILReader

    return PILReader(reverse_indexing=False) if path.endswith(".png") else NibabelReader()


def _base(cfg: MonaiConfig, keys: list[str], sample_path: str) -> list[Any]:
    from monai import transforms as mt

    label_keys = [k for k in keys if k == "label"]
    steps: list[Any] = [
        mt.LoadImaged(keys=keys, reader=_reader(sample_path), image_only=True),
        mt.EnsureChannelFirstd(keys=keys),
    ]
    if cfg.target_spacing:
        modes = ["bilinear" if k == "image" or cfg.task == "enhancement" else "nearest" for k in keys]
        steps.append(mt.Spacingd(keys=keys, pixdim=cfg.target_spacing, mode=modes))
    steps += _normalise(cfg, ["image", "label"] if cfg.task == "enhancement" and label_keys else ["image"])
    if cfg.task == "segmentation" and label_keys:
        steps.append(mt.Lambdad(keys=label_keys, func=_label_indexer(cfg.label_values)))
    return steps


def _normalise(cfg: MonaiConfig, keys: list[str]) -> list[Any]:
    from monai import transforms as mt

    if cfg.intensity == "rgb_0_1":
        return [mt.ScaleIntensityRanged(keys=keys, a_min=0, a_max=255, b_min=0.0, b_max=1.0, clip=True)]
    if cfg.intensity == "global_zscore" and cfg.mean_std:
        mean, std = (np.asarray(v, dtype=np.float32) for v in cfg.mean_std)
        return [mt.NormalizeIntensityd(keys=keys, subtrahend=mean, divisor=std)]
    if cfg.intensity == "ct_window" and cfg.clip and cfg.mean_std:
        low, high = cfg.clip
        mean, std = (np.asarray(v, dtype=np.float32) for v in cfg.mean_std)
        return [
            mt.ScaleIntensityRanged(keys=keys, a_min=low, a_max=high, b_min=low, b_max=high, clip=True),
            mt.NormalizeIntensityd(keys=keys, subtrahend=mean, divisor=std),
        ]
    return [mt.NormalizeIntensityd(keys=keys, nonzero=True, channel_wise=True)]


def _label_indexer(label_values: list[int]) -> Any:
    lookup = {value: index for index, value in enumerate(label_values)}

    def to_index(label: Any) -> Any:
        out = label.clone() if hasattr(label, "clone") else label.copy()
        for value, index in lookup.items():
            out[label == value] = index
        return out

    return to_index


def denormalise(cfg: MonaiConfig, array: np.ndarray) -> np.ndarray:
    """Undo the intensity scaling of an enhancement output (input and target share it)."""
    if cfg.intensity == "rgb_0_1":
        return np.clip(array * 255.0, 0, 255)
    if cfg.intensity == "global_zscore" and cfg.mean_std:
        return array * cfg.mean_std[1] + cfg.mean_std[0]
    return array


def train_transforms(cfg: MonaiConfig, sample_path: str) -> Any:
    from monai import transforms as mt

    keys = ["image", "label"]
    steps = _base(cfg, keys, sample_path)
    steps.append(mt.SpatialPadd(keys=keys, spatial_size=cfg.patch_size))
    if cfg.task == "segmentation":
        pos, neg = cfg.pos_neg
        steps.append(
            mt.RandCropByPosNegLabeld(
                keys=keys, label_key="label", spatial_size=cfg.patch_size, pos=pos, neg=neg, num_samples=1
            )
        )
    else:
        steps.append(mt.RandSpatialCropd(keys=keys, roi_size=cfg.patch_size, random_size=False))
    steps.append(mt.RandFlipd(keys=keys, prob=0.5, spatial_axis=0))
    return mt.Compose(steps)


def inference_transforms(cfg: MonaiConfig, sample_path: str) -> Any:
    from monai import transforms as mt

    return mt.Compose(_base(cfg, ["image"], sample_path))


def write_prediction(prediction: np.ndarray, reference: str, target: Path) -> None:
    """Write in the reference's geometry: NIfTI with its affine and header, PNG at its size."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if reference.endswith(".png"):
        from PIL import Image

        with Image.open(reference) as picture:
            size = picture.size
        array = (
            prediction if prediction.dtype in (np.uint8, np.uint16) else np.clip(prediction, 0, 255).astype(np.uint8)
        )
        if (array.shape[1], array.shape[0]) != size:
            raise InvalidInput(f"prediction shape {array.shape} does not match {Path(reference).name}", field="predict")
        Image.fromarray(array).save(target)
        return
    import nibabel as nib

    ref: Any = nib.load(reference)
    array = prediction
    if array.shape != ref.shape[: array.ndim]:
        raise InvalidInput(f"prediction shape {array.shape} does not match {Path(reference).name}", field="predict")
    header = ref.header.copy()
    header.set_data_dtype(array.dtype)
    image = nib.Nifti1Image(array, ref.affine, header)
    image.header.set_slope_inter(1, 0)
    nib.save(image, target)
