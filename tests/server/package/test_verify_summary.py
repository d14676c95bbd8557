"""`amid verify-package`'s last line names what changed: the edited file, not every file of its fold."""

from __future__ import annotations

from amid.server.package.checks import PackageCheck, failed, passed
from amid.server.package.verify import VerifyReport
from amid.server.workspace import Workspace
from tests.server.package.conftest import amid
from tests.server.package.test_package import first, flip_byte


def test_a_one_byte_change_to_a_prediction_names_that_file_in_the_summary(run_copy: Workspace) -> None:
    package = run_copy.root / "package"
    rel = first(package, "predictions/")
    flip_byte(package / rel)
    result = amid("verify-package", str(package), "-w", str(run_copy.root))
    summary = result.output.strip().splitlines()[-1]
    assert result.exit_code == 1 and "FAILED (" in summary
    assert summary.endswith(f"files: {rel}")  # it listed every prediction of the fold and scores.json


def _report(*checks: PackageCheck) -> VerifyReport:
    return VerifyReport(package="p", attempt_id="att-1", checks=list(checks))


def test_without_a_byte_change_the_summary_names_what_each_failure_names() -> None:
    rescored = failed("re-score", "fold 0 disagrees", ["scores.json", "predictions/fold-0/a.nii.gz"])
    both = _report(passed("files", "ok"), rescored, failed("grader", "invalid", ["submission"]))
    assert both.named_files() == ["predictions/fold-0/a.nii.gz", "scores.json", "submission"]
    changed = _report(failed("files", "changed: code/x.py", ["code/x.py"]), rescored)
    assert changed.named_files() == ["code/x.py"]
    assert _report(passed("files", "ok")).named_files() == []
