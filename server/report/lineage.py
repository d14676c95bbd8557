"""A layered layout of the attempt lineage: generation left to right, a chain of children on one row."""

from __future__ import annotations

from collections import defaultdict


def layers(attempts: list[tuple[str, str | None]]) -> dict[str, tuple[int, int]]:
    """(column, row) per attempt from (attempt_id, parent_attempt_id) pairs in submission order.

    The column is the generation (a root is 0, its child 1, …); a first child stays on its parent's
    row, later children open new rows. A parent outside the list makes its child a root."""
    known = {attempt_id for attempt_id, _ in attempts}
    children: dict[str, list[str]] = defaultdict(list)
    roots = []
    for attempt_id, parent in attempts:
        if parent in known and parent != attempt_id:
            children[parent].append(attempt_id)
        else:
            roots.append(attempt_id)
    position: dict[str, tuple[int, int]] = {}
    n_rows = 0
    for root in roots + [a for a, _ in attempts]:  # the tail places members of a parent cycle, if any
        if root in position:
            continue
        stack = [(root, 0, n_rows)]
        n_rows += 1
        while stack:
            node, column, row = stack.pop()
            if node in position:
                continue
            position[node] = (column, row)
            for index, child in enumerate(children[node]):
                stack.append((child, column + 1, row if index == 0 else n_rows))
                n_rows += index > 0
    return position
