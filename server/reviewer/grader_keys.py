"""The contract's metrics in a task grader's result: by exact key, else by one documented rule.

A grader returns a dict: metric keys, leaderboard positions (`overall`, `<metric>_position`) and
often parts of a metric (per-class scores). A contract metric is the key of its own name; failing
that, the one key that is its name with an aggregate word before or after it. Anything looser picks
a key by luck (the first key containing `f1` might be `f1_tumor`), so it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from amid.server.errors import InvalidInput

RANKING_KEYS = ("overall", "mean_position", "percentile")  # leaderboard positions, not metrics
# Words that make a grader key the summary of a metric over classes or cases (macro_f1, dice_mean).
AGGREGATE_WORDS = ("macro", "micro", "mean", "avg", "average", "overall")


def metrics_of(names: Iterable[str], metrics: dict[str, float | None]) -> dict[str, float | None]:
    """The contract's metrics from the grader's result, by name. A metric the grader returns under
    another key takes the one spare key that is the metric's name with an aggregate word before or
    after it (`macro_f1`, `f1_mean`: PUMA returns `f1` as `macro_f1` beside per-class `f1_tumor`);
    two such keys are ambiguous and refused, and a metric with none is not recomputed."""
    wanted = set(names)
    if len(wanted) == 1 and set(metrics) == {"score"}:  # one number (MLE-bench's graders): the one metric
        return {next(iter(wanted)): metrics["score"]}
    spare = [k for k in metrics if k not in wanted and k not in RANKING_KEYS and not k.endswith("_position")]
    found: dict[str, float | None] = {}
    for name in sorted(wanted):
        if name in metrics:
            found[name] = metrics[name]
            continue
        match = [k for k in spare if k in _aggregate_keys(name)]
        if len(match) > 1:
            raise InvalidInput(
                f"metric {name!r}: the task's grader returns no key {name!r} and several that could mean it "
                f"({match}); name the one to use as the metric (the key itself, in metric_config.json's "
                "metric_directions) and import the task again",
                field="metrics",
            )
        if match:
            found[name] = metrics[match[0]]
    return found


def _aggregate_keys(name: str) -> set[str]:
    return {f"{word}_{name}" for word in AGGREGATE_WORDS} | {f"{name}_{word}" for word in AGGREGATE_WORDS}
