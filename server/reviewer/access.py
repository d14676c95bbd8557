"""ILLEGAL_DATA_ACCESS: does the attempt's code, its logs or its training manifest reach into
private/ or name holdout cases? The code is every file the commit changed since the run began.
Replays add what they were seen reaching for (the workspace, the network) in `ctx.replay_findings`,
so this check runs after them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from amid.server.repo import changed_files, resolve_commit
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.report import Check, fired, head, ok

MAX_LOG_BYTES = 5_000_000
MAX_HITS = 50


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern[str]


def patterns(ctx: ReviewContext) -> list[Pattern]:
    private = ctx.workspace.private_dir
    literal = sorted({str(private), str(private.resolve())}, key=len, reverse=True)
    found = [
        Pattern("private path", re.compile("|".join(re.escape(p) for p in literal))),
        Pattern("relative private path", re.compile(r"(?:\.\./)+private(?:/|\b)")),
        Pattern("private file", re.compile(r"\bprivate/(?:holdout|answers|labels|grader)\b")),
    ]
    holdout = sorted({c.case_id for c in ctx.holdout_cases}, key=len, reverse=True)
    if holdout:
        ids = "|".join(re.escape(c) for c in holdout)
        found.append(Pattern("holdout case id", re.compile(rf"(?<![0-9A-Za-z])(?:{ids})(?![0-9A-Za-z])")))
    return found


def access_check(ctx: ReviewContext) -> Check:
    rules = patterns(ctx)
    hits: list[dict[str, object]] = []
    for source, name, text in _sources(ctx):
        for number, line in enumerate(text.splitlines(), 1):
            for rule in rules:
                match = rule.regex.search(line)
                if match:
                    hits.append(
                        {
                            "source": source,
                            "file": name,
                            "line": number,
                            "kind": rule.kind,
                            "match": match.group(0),
                            "text": line.strip()[:200],
                        }
                    )
            if len(hits) >= MAX_HITS:
                break
    hits.extend(_manifest_hits(ctx))
    hits.extend(ctx.replay_findings)
    if hits:
        h = hits[0]
        return fired(
            "ILLEGAL_DATA_ACCESS",
            f"{len(hits)} references to private data; first: {h['source']} {h['file']}:{h['line']} "
            f"({h['kind']}: {h['match']!s})",
            hits=head(hits),
            n_hits=len(hits),
        )
    return ok(
        "ILLEGAL_DATA_ACCESS", "no reference to private/ or holdout cases in the commit, logs, manifest or replays"
    )


def _sources(ctx: ReviewContext) -> Iterator[tuple[str, str, str]]:
    repo = ctx.workspace.commit_store  # the server's copy: agents cannot rewrite it
    if resolve_commit(repo, ctx.job.commit) == ctx.job.commit:
        for path, data in changed_files(repo, ctx.job.commit):
            yield "commit", path, data.decode("utf-8", errors="replace")
    for ref in ctx.files("logs"):
        if ctx.usable(ref):
            with ctx.path(ref).open("rb") as handle:
                yield "logs", ref.declared_path, handle.read(MAX_LOG_BYTES).decode("utf-8", errors="replace")


def _manifest_hits(ctx: ReviewContext) -> list[dict[str, object]]:
    manifest, _ = ctx.training_manifest
    holdout = {c.case_id for c in ctx.holdout_cases}
    if not manifest or not holdout:
        return []
    used = sorted({c for cases in manifest.values() for c in cases if c in holdout})
    if not used:
        return []
    where = ctx.files("training_manifest")[0].declared_path
    text = f"{len(used)} holdout cases"
    return [
        {
            "source": "training_manifest",
            "file": where,
            "line": 0,
            "kind": "holdout case trained on",
            "match": ", ".join(used[:10]),
            "text": text,
        }
    ]
