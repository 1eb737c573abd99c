"""The calibration samples (semantics.md "Version 2" → Calibrated estimates): per (provider kind,
model), the newest ``KEEP`` usage ratios, oldest first. Stored in the database, so every
conversation, every process and every restart shares them; ``policy.calibration`` computes the
factor from them (the store does not import the policy).

Every ``prepare`` reads its key's ratios, so the connection remembers them (``RatioMemo``) and
trusts what it remembers only while SQLite's ``data_version`` says no other connection committed;
its own writes forget the key they change.

Bounded whatever clients report: a model name longer than ``MAX_MODEL_CHARS`` is kept as its
start and a SHA-256 of the whole (distinct names stay distinct keys; 100 reports with 1 MB model
names added 192 MiB to the database before), at most ``MAX_KEYS`` keys are kept (a report under
a new key forgets the keys written longest ago), and the connection remembers at most
``MEMO_KEYS`` keys' ratios."""

from __future__ import annotations

import hashlib

from chat_history.store.engine import sqlite3

#: How many ratios a key keeps: the factor is the median of the newest 20.
KEEP = 20
#: Model names longer than this are stored as their start and a hash (real ones, Vertex paths
#: and Bedrock ARNs included, are far shorter).
MAX_MODEL_CHARS = 256
_MODEL_START = 180
#: Keys (provider kind or alias, model) kept; past it, those reported longest ago go.
MAX_KEYS = 500
#: Keys whose ratios a connection remembers.
MEMO_KEYS = 256


def stored_model(model: str | None) -> str | None:
    """The model name as the calibration key holds it: as is, or for a name longer than
    MAX_MODEL_CHARS its start and the SHA-256 of the whole."""
    if model is None or len(model) <= MAX_MODEL_CHARS:
        return model
    digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{model[:_MODEL_START]}…sha256:{digest}"


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
    model = stored_model(model)
    newest = connection.execute(
        "SELECT ratio FROM calibration_samples WHERE kind = ? AND model IS ? "
        "ORDER BY id DESC LIMIT ?",
        (kind, model, KEEP),
    ).fetchall()
    return tuple(float(row[0]) for row in reversed(newest))


def add_ratio(connection: sqlite3.Connection, kind: str, model: str | None, ratio: float) -> None:
    """Append a ratio to the key's samples and forget all but the newest KEEP; a new key
    makes the keys past MAX_KEYS (those written longest ago) go."""
    model = stored_model(model)
    new_key = (
        connection.execute(
            "SELECT 1 FROM calibration_samples WHERE kind = ? AND model IS ? LIMIT 1",
            (kind, model),
        ).fetchone()
        is None
    )
    connection.execute(
        "INSERT INTO calibration_samples (kind, model, ratio) VALUES (?, ?, ?)",
        (kind, model, ratio),
    )
    if new_key:
        _forget_old_keys(connection)
    connection.execute(
        "DELETE FROM calibration_samples WHERE kind = ? AND model IS ? AND id < ("
        "SELECT id FROM calibration_samples WHERE kind = ? AND model IS ? "
        "ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (kind, model, kind, model, KEEP - 1),
    )


def _forget_old_keys(connection: sqlite3.Connection) -> None:
    """Delete the samples of every key but the MAX_KEYS written most recently."""
    connection.execute(
        "DELETE FROM calibration_samples WHERE id IN (SELECT s.id FROM calibration_samples s "
        "JOIN (SELECT kind, model, MAX(id) AS newest FROM calibration_samples "
        "GROUP BY kind, model ORDER BY newest DESC LIMIT -1 OFFSET ?) old "
        "ON s.kind = old.kind AND s.model IS old.model)",
        (MAX_KEYS,),
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
        self._ratios.pop((kind, stored_model(model)), None)

    def ratios(
        self, connection: sqlite3.Connection, kind: str, model: str | None
    ) -> tuple[float, ...]:
        """The key's ratios: remembered when no other connection committed since, else read."""
        version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if version != self.version:
            self._ratios.clear()
            self.version = version
        key = (kind, stored_model(model))
        found = self._ratios.get(key)
        if found is None:
            if len(self._ratios) >= MEMO_KEYS:
                self._ratios.clear()
            found = self._ratios[key] = ratios(connection, kind, model)
        return found
