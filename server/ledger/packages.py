"""The final package's ledger rows (docs/ARCHITECTURE.md §12): each build with its manifest hash, and the final
choice a forced re-finalization replaces (the old choice stays in the events log)."""

from __future__ import annotations

import json
from typing import Any

from amid.server.ledger.database import Database, utcnow
from amid.server.ledger.supervision import final_choice_values


class Packages:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, attempt_id: str, package_path: str, manifest_sha256: str, files: tuple[int, int], by: str) -> int:
        """One build of the package; `files` is (number of files, total bytes)."""
        with self.db.transaction() as cur:
            row = cur.execute(
                "INSERT INTO packages (attempt_id, package_path, manifest_sha256, n_files, size_bytes, built_by, "
                "built_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING package_id",
                [attempt_id, package_path, manifest_sha256, files[0], files[1], by, utcnow()],
            ).fetchone()
            assert row is not None
            cur.execute(
                "INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) "
                "VALUES (?, ?, 'package_built', 'attempt', ?, ?)",
                [utcnow(), by, attempt_id, json.dumps({"package_id": int(row[0]), "manifest_sha256": manifest_sha256})],
            )
        return int(row[0])

    def latest(self, attempt_id: str | None = None) -> dict[str, Any] | None:
        """The newest build (of one attempt, when given)."""
        return self.db.fetchone(
            "SELECT * FROM v_packages WHERE ? IS NULL OR attempt_id = ? ORDER BY package_id DESC LIMIT 1",
            [attempt_id, attempt_id],
        )

    def builds(self, attempt_id: str) -> list[dict[str, Any]]:
        """Every recorded build of one attempt's package, oldest first."""
        return self.db.fetchall("SELECT * FROM v_packages WHERE attempt_id = ? ORDER BY package_id", [attempt_id])

    def set_choice_package(self, choice_id: int, package_path: str) -> None:
        """Name the package of a final choice recorded before it was built."""
        self.db.execute("UPDATE final_choices SET package_path = ? WHERE choice_id = ?", [package_path, choice_id])

    def replace_final(self, choice_id: int, row: dict[str, Any], by: str) -> None:
        """A forced re-finalization: the final choice now names another attempt; the replaced
        choice is kept in the events log."""
        with self.db.transaction() as cur:
            old = cur.execute(
                "SELECT attempt_id, reason, package_path FROM final_choices WHERE choice_id = ?", [choice_id]
            ).fetchone()
            cur.execute(
                "UPDATE final_choices SET attempt_id = ?, lane_id = ?, verified_score = ?, reason = ?, audit_id = ?, "
                "package_path = ?, decided_by = ?, decided_at = ? WHERE choice_id = ?",
                [*final_choice_values(row, by), choice_id],
            )
            payload = {"replaced": dict(zip(("attempt_id", "reason", "package_path"), old or (), strict=False))}
            cur.execute(
                "INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) "
                "VALUES (?, ?, 'final_choice_replaced', 'attempt', ?, ?)",
                [utcnow(), by, row["attempt_id"], json.dumps(payload, default=str)],
            )
