"""The calibration samples (semantics.md "Version 2" → Calibrated estimates): per (provider kind,
model), the newest ``KEEP`` usage ratios, oldest first. Stored in the database, so every
conversation, every process and every restart shares them; ``policy.calibration`` computes the
factor from them (the store does not import the policy).

Every ``prepare`` reads its key's ratios, so the connection remembers them (``RatioMemo``) and
trusts what it remembers only while SQLite's ``data_version`` says no other connection committed;
its own writes forget the key they change."""

from __future__ import annotations

from chat_history.store.engine import sqlite3

#: How many ratios a key keeps: the factor is the median of the newest 20.
KEEP = 20

#: The table (schema version 6); ``model`` NULL is its own key (a request that named none).
SCHEMA = """
CREATE TABLE IF NOT EXISTS calibration_samples (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT,
    ratio REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calibration_by_key ON calibration_samples (kind, model, id)
"""

RatioKey = tuple[str, "str | None"]


def ratios(connection: sqlite3.Connection, kind: str, model: str | None) -> tuple[float, ...]:
    """The key's newest KEEP ratios, oldest first."""
    newest = connection.execute(
        "SELECT ratio FROM calibration_samples WHERE kind = ? AND model IS ? "
        "ORDER BY id DESC LIMIT ?",
        (kind, model, KEEP),
    ).fetchall()
    return tuple(float(row[0]) for row in reversed(newest))


def add_ratio(connection: sqlite3.Connection, kind: str, model: str | None, ratio: float) -> None:
    """Append a ratio to the key's samples and forget all but the newest KEEP."""
    connection.execute(
        "INSERT INTO calibration_samples (kind, model, ratio) VALUES (?, ?, ?)",
        (kind, model, ratio),
    )
    connection.execute(
        "DELETE FROM calibration_samples WHERE kind = ? AND model IS ? AND id < ("
        "SELECT id FROM calibration_samples WHERE kind = ? AND model IS ? "
        "ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (kind, model, kind, model, KEEP - 1),
    )


class RatioMemo:
    """The ratios this connection read, per key, valid while ``data_version`` is unchanged (it
    changes when another connection commits; this connection's own writes call ``forget``)."""

    def __init__(self) -> None:
        self.version: int | None = None
        self._ratios: dict[RatioKey, tuple[float, ...]] = {}

    def clear(self) -> None:
        """Forget everything (a new connection: its data_version is not comparable)."""
        self.version = None
        self._ratios.clear()

    def forget(self, kind: str, model: str | None) -> None:
        """Forget the key's ratios (this connection just recorded one)."""
        self._ratios.pop((kind, model), None)

    def ratios(
        self, connection: sqlite3.Connection, kind: str, model: str | None
    ) -> tuple[float, ...]:
        """The key's ratios: remembered when no other connection committed since, else read."""
        version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if version != self.version:
            self._ratios.clear()
            self.version = version
        key = (kind, model)
        found = self._ratios.get(key)
        if found is None:
            found = self._ratios[key] = ratios(connection, kind, model)
        return found
