"""Drive the real MLE-bench package: run a competition's own prepare.py, or grade a submission with its
own grade_fn exactly as MLE-bench's harness calls it. Runs under the grader environment's python (see
grader_env.sh), where `mlebench` imports:

    python harness.py prepare DATA_DIR COMPETITION_ID
    python harness.py grade DATA_DIR COMPETITION_ID SUBMISSION_CSV [ANSWERS_CSV]

`prepare` is `mlebench.data.download_and_prepare_dataset` without the download: the registry's
folders, `prepare_fn(raw=, public=, private=)`, then the description written into public/.
`grade` is `mlebench.grade.grade_csv`'s call: `competition.grader(read_csv(submission),
load_answers(answers))`, whose None means an invalid submission; it prints one JSON line:
{"valid": true, "score": S} or {"valid": false}. ANSWERS_CSV replaces the competition's answers
(a validation fold's, in the same schema).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _competition(data_dir: str, competition_id: str) -> Any:
    from mlebench.registry import registry

    return registry.set_data_dir(Path(data_dir)).get_competition(competition_id)


def prepare(data_dir: str, competition_id: str) -> None:
    competition = _competition(data_dir, competition_id)
    for folder in (competition.raw_dir, competition.public_dir, competition.private_dir):
        folder.mkdir(parents=True, exist_ok=True)
    competition.prepare_fn(raw=competition.raw_dir, public=competition.public_dir, private=competition.private_dir)
    (competition.public_dir / "description.md").write_text(competition.description, encoding="utf-8")


def grade(data_dir: str, competition_id: str, submission_csv: str, answers: str = "") -> dict[str, object]:
    from mlebench.utils import load_answers, read_csv

    competition = _competition(data_dir, competition_id)
    answers_path = Path(answers) if answers else competition.answers
    score = competition.grader(read_csv(Path(submission_csv)), load_answers(answers_path))
    return {"valid": score is not None, "score": None if score is None else float(score)}


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
