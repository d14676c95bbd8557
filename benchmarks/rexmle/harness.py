"""Drive the real ReX-MLE package: run a challenge's own prepare.py, or grade a submission with
its own grade_fn exactly as ReX-MLE's harness calls it. Runs under the grader environment's
python (see grader_env.sh), where `rexmle` imports:

    python harness.py prepare DATA_DIR CHALLENGE_ID
    python harness.py grade DATA_DIR CHALLENGE_ID SUBMISSION_CSV

`grade` prints one JSON line: {"valid": true, "result": {...}} or {"valid": false, "error": "..."}.
An InvalidSubmissionError is reported as invalid; any other exception too, with its type.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path


def _challenge(data_dir: str, challenge_id: str):  # type: ignore[no-untyped-def]
    from rexmle.registry import registry

    return registry.set_data_dir(Path(data_dir)).get_challenge(challenge_id)


def prepare(data_dir: str, challenge_id: str) -> None:
    challenge = _challenge(data_dir, challenge_id)
    for folder in (challenge.raw_dir, challenge.public_dir, challenge.private_dir):
        folder.mkdir(parents=True, exist_ok=True)
    challenge.prepare_fn(challenge.raw_dir, challenge.public_dir, challenge.private_dir)


def grade(data_dir: str, challenge_id: str, submission_csv: str) -> dict[str, object]:
    import pandas as pd

    challenge = _challenge(data_dir, challenge_id)
    grade_fn = challenge.grader.grade_fn
    kwargs: dict[str, object] = {}
    parameters = inspect.signature(grade_fn).parameters
    if "submission_dir" in parameters:
        kwargs["submission_dir"] = Path(submission_csv).parent
    if "answers_dir" in parameters:
        kwargs["answers_dir"] = challenge.answers_dir
    try:
        result = grade_fn(pd.read_csv(submission_csv), pd.read_csv(challenge.answers), **kwargs)
    except Exception as exc:  # the verdict is the point: report every failure as data
        return {"valid": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    if isinstance(result, dict):
        return {"valid": True, "result": {k: _number(v) for k, v in result.items()}}
    return {"valid": True, "result": {"score": _number(result)}}


def _number(value: object) -> object:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


def main(argv: list[str]) -> int:
    verb, *args = argv
    if verb == "prepare":
        prepare(*args)
        return 0
    if verb == "grade":
        print(json.dumps(grade(*args)))
        return 0
    print(f"unknown verb {verb!r}; expected prepare or grade", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
