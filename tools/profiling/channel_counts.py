"""Cases whose channel count departs from the dataset's: most often a 4-D file in a 3-D task.

A 4-D NIfTI's fourth axis is read as channels, which is right for a task that stores its channels
that way (the Medical Segmentation Decathlon's BraTS) and wrong for one fMRI run among anatomical
scans (`functional.nii`: 20 time points would become 20 channels). Only the dataset can tell the
two apart, so the rule is relative: the channel count most cases have is the task's, and a case
with another is flagged, a 4-D file as an error (it cannot enter the same model), any other
difference (a grey JPEG among colour ones) as a warning.
"""

from __future__ import annotations

from collections import Counter

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.models import ProfileIssue


def case_channels(result: CaseResult) -> int:
    """Channels of one case: every image file's channels, 4-D volumes counted along their 4th axis."""
    return sum(h.n_channels for h in result.headers if h)


def _readable(results: list[CaseResult]) -> list[CaseResult]:
    """Cases whose every image file was read: a missing channel file is its own issue already."""
    return [r for r in results if r.headers and all(h is not None for h in r.headers)]


def usual_channels(results: list[CaseResult]) -> int | None:
    """The channel count most readable cases have (the smaller one on a tie); None without any."""
    counts = Counter(case_channels(r) for r in _readable(results))
    if not counts:
        return None
    return min(counts, key=lambda n: (-counts[n], n))


def channel_count_issues(results: list[CaseResult]) -> list[ProfileIssue]:
    """One issue per case whose channel count is not the usual one."""
    usual = usual_channels(results)
    readable = _readable(results)
    share = sum(case_channels(r) == usual for r in readable)
    return [_issue(r, usual, share, len(readable)) for r in readable if case_channels(r) != usual]


def _issue(result: CaseResult, usual: int | None, share: int, total: int) -> ProfileIssue:
    channels = case_channels(result)
    others = f"where {share} of {total} cases have {usual}"
    four_d = next((h for h in result.headers if h and "fourth_axis_length" in h.meta), None)
    if four_d is not None:
        length, step = four_d.meta["fourth_axis_length"], four_d.meta.get("fourth_axis_step", "?")
        message = (
            f"4-D image: {length} volumes along its 4th axis (step {step}; time points?) read as "
            f"{channels} channels, {others}: give the task one 3-D volume per channel"
        )
        return ProfileIssue(
            code="four_d_image", severity="error", case_id=result.case_id, path=four_d.path, message=message
        )
    header = result.header
    assert header is not None
    message = f"{channels} channel(s), {others}"
    return ProfileIssue(
        code="channel_count_mismatch", severity="warning", case_id=result.case_id, path=header.path, message=message
    )
