"""The MONAI lane's training configuration, chosen from the data profile.

Choices and the profile values behind them:
- network: SegResNet for 3-D, BasicUNet for 2-D (both from `monai.networks.nets`);
- target spacing: the median spacing (nnU-Net's choice), on the images' own voxel axes;
- patch: the median image size after resampling, capped and rounded to what the network divides by;
- intensity: enhancement z-scores input and target with the input's statistics (invertible);
  CT clips to the foreground's 0.5-99.5 percentiles then z-scores with its mean and std
  (nnU-Net's CT scheme); RGB scales to [0, 1]; other images z-score per image over non-zero voxels;
- loss: Dice + cross-entropy, Dice + focal under sparse foreground or class imbalance, L1 for enhancement;
- sampling: foreground-centred crops twice as often as background ones under sparse foreground.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from amid.tools.planning.facts import PlanningFacts

SUPPORTED_TASKS = ("segmentation", "enhancement")
PATCH_CAP = {2: 256, 3: 128}
PATCH_MULTIPLE = 16  # BasicUNet halves four times; SegResNet three times
CONFIG_NAME = "monai_config.json"
Intensity = Literal["ct_window", "zscore", "global_zscore", "rgb_0_1"]


class MonaiConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: Literal["segmentation", "enhancement"]
    spatial_dims: Literal[2, 3]
    in_channels: int = Field(ge=1)
    label_values: list[int] = Field(default_factory=list, description="task value of each output class, in order")
    network: Literal["SegResNet", "BasicUNet"]
    target_spacing: list[float] | None = Field(description="mm per voxel axis; None keeps the native grid")
    patch_size: list[int]
    intensity: Intensity
    clip: list[float] | None = None
    mean_std: list[float] | None = None
    loss: Literal["DiceCE", "DiceFocal", "L1"]
    pos_neg: list[float] = Field(default_factory=lambda: [1.0, 1.0])
    epochs: int = Field(default=300, ge=1)
    iterations_per_epoch: int | None = Field(default=None, ge=1, description="None: one pass over the cases")
    batch_size: int = Field(default=2, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    seed: int = 0
    reasons: list[str] = Field(default_factory=list, description="the profile values behind each choice")

    @property
    def out_channels(self) -> int:
        return len(self.label_values) if self.task == "segmentation" else self.in_channels

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> MonaiConfig:
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))


def config_from_facts(facts: PlanningFacts, *, epochs: int = 300) -> MonaiConfig:
    """The configuration the profile calls for (raises ValueError for a task the scaffold does not cover)."""
    if facts.task_type not in SUPPORTED_TASKS:
        raise ValueError(f"the MONAI scaffold covers {SUPPORTED_TASKS}, not {facts.task_type}")
    dims = facts.dims
    reasons = [f"{dims}-D data -> {'SegResNet' if dims == 3 else 'BasicUNet'}"]
    spacing = list(facts.median_spacing) if dims == 3 and facts.median_spacing else None
    if spacing:
        reasons.append(f"target spacing = median spacing {spacing}")
    intensity, clip, mean_std = _intensity(facts, reasons)
    sparse = facts.holds("sparse_foreground") or facts.holds("class_imbalance")
    if facts.task_type == "enhancement":
        loss = "L1"
    else:
        loss = "DiceFocal" if sparse else "DiceCE"
        reasons.append(f"loss {loss}: sparse_foreground or class_imbalance is {sparse}")
    return MonaiConfig(
        task=facts.task_type,  # type: ignore[arg-type]
        spatial_dims=dims,
        in_channels=3 if facts.rgb else facts.n_channels,
        label_values=sorted(facts.label_values) if facts.task_type == "segmentation" else [],
        network="SegResNet" if dims == 3 else "BasicUNet",
        target_spacing=spacing,
        patch_size=_patch(facts, reasons),
        intensity=intensity,
        clip=clip,
        mean_std=mean_std,
        loss=loss,  # type: ignore[arg-type]
        pos_neg=[2.0, 1.0] if facts.holds("sparse_foreground") else [1.0, 1.0],
        epochs=epochs,
        reasons=reasons,
    )


def _intensity(facts: PlanningFacts, reasons: list[str]) -> tuple[Intensity, list[float] | None, list[float] | None]:
    if facts.task_type == "enhancement" and not facts.rgb:
        # Input and target share one invertible scaling (the input's statistics); no clipping.
        channel = facts.intensity[0] if facts.intensity else None
        mean_std = [channel.mean, max(channel.std, 1e-6)] if channel else [0.0, 1.0]
        reasons.append(f"enhancement -> input and target z-scored with the input's mean/std {mean_std}")
        return "global_zscore", None, mean_std
    if facts.rgb:
        reasons.append("RGB images -> scale to [0, 1]")
        return "rgb_0_1", None, None
    if facts.modality == "CT" and facts.intensity:
        channel = facts.intensity[0]
        clip = [channel.percentile_00_5, channel.percentile_99_5]
        reasons.append(f"CT -> clip to foreground p0.5/p99.5 {clip}, z-score with mean {channel.mean:.4g}")
        return "ct_window", clip, [channel.mean, max(channel.std, 1e-6)]
    reasons.append(f"{facts.modality} -> per-image z-score over non-zero voxels")
    return "zscore", None, None


def _patch(facts: PlanningFacts, reasons: list[str]) -> list[int]:
    shape = facts.median_shape[: facts.dims] or [PATCH_CAP[facts.dims]] * facts.dims
    cap = PATCH_CAP[facts.dims]
    patch = [max(PATCH_MULTIPLE, min(cap, math.floor(s / PATCH_MULTIPLE) * PATCH_MULTIPLE)) for s in shape]
    reasons.append(f"patch {patch} from median shape {shape} (cap {cap}, multiple of {PATCH_MULTIPLE})")
    return patch
