"""Run a task author's grader on one submission, in its own process; print only valid / invalid.

    python grader_runner.py GRADER_PY FUNCTION SUBMISSION_CSV SUBMISSION_DIR ANSWERS_CSV ANSWERS_DIR

The grader follows the ReX-MLE / MLE-bench convention `grade(submission_df, answers_df,
submission_dir, answers_dir)` and raises (e.g. `InvalidSubmissionError`) on an invalid submission.
Its score is discarded here on purpose: the reviewer reports validity, never a test score. The
last line of stdout is the JSON verdict; whatever the grader prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys


def main(argv: list[str]) -> int:
    grader, function, submission_csv, submission_dir, answers_csv, answers_dir = argv
    spec = importlib.util.spec_from_file_location("amid_task_grader", grader)
    if spec is None or spec.loader is None:
        print(json.dumps({"valid": False, "reason": f"cannot load grader {grader}"}))
        return 0
    module = importlib.util.module_from_spec(spec)
    with contextlib.redirect_stdout(sys.stderr):
        spec.loader.exec_module(module)
        grade = getattr(module, function)
        import pandas as pd

        try:
            grade(pd.read_csv(submission_csv), pd.read_csv(answers_csv), submission_dir, answers_dir or None)
        except Exception as exc:
            verdict = {"valid": False, "reason": f"{type(exc).__name__}: {exc}"[:1000]}
        else:
            verdict = {"valid": True, "reason": ""}
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
