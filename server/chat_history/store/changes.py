"""Stateless SQL of the change watch (``service.watch``) and of the cache's coherence: each
conversation's fingerprint (policy.changes), how its rows grew past an id, and the change marks.
Every value comes from a primary key or an index: a fingerprint costs a few lookups, not the
history.

**Change marks** (schema version 10; PostgreSQL's 4): every committed write stamps each
conversation it changed (``Transaction.touched``: both keys of a moved one) in ``change_marks``
with the change counter's value at its commit (SQLite: ``change_counter``, bumped by the writer,
the only one; PostgreSQL: ``store_version``, bumped under its row lock at the commit, so stamps
follow commit order). A reader that saw the counter at ``p`` finds what changed since in the
marks past ``p``: a look costs what changed, not the workspace. Read the counter before the
marks (a commit in between is then found again next time, never missed)."""

from __future__ import annotations

from collections.abc import Collection

from chat_history.model import Key
from chat_history.policy.changes import Fingerprint, Growth
from chat_history.store.engine import sqlite3

# One pass over the workspace's rows, grouped (correlated lookups per conversation ran as a scan
# of the history per conversation on PostgreSQL: minutes at 10,000 conversations).
#: The newest and oldest ids are subqueries on the messages index, two lookups each: a join of
#: the messages grouped per conversation read every row (~5 ms for an append to a conversation
#: of 10,000 rows, whose fingerprint the watch re-reads before its commit: issue 36).
_FINGERPRINT = """
SELECT c.conversation,
    (SELECT MAX(m.id) FROM messages m
     WHERE m.workspace = c.workspace AND m.conversation = c.conversation),
    (SELECT MIN(m.id) FROM messages m
     WHERE m.workspace = c.workspace AND m.conversation = c.conversation),
    c.message_count, c.tokens, c.last_activity, c.title, c.metadata, s.updated_at,
    r.id * 4294967296 + r.revision, c.switches
FROM conversations c
LEFT JOIN summaries s ON s.workspace = c.workspace AND s.conversation = c.conversation
LEFT JOIN replies r ON r.workspace = c.workspace AND r.conversation = c.conversation
WHERE c.workspace = ? {only}
GROUP BY c.workspace, c.conversation, c.message_count, c.tokens, c.last_activity, c.title,
    c.metadata, s.updated_at, r.id, r.revision, c.switches
"""


def _fingerprint(row: tuple[object, ...]) -> Fingerprint:
    (
        _,
        last_id,
        first_id,
        count,
        tokens,
        last_activity,
        title,
        metadata,
        summary_at,
        reply,
        branch,
    ) = row
    return Fingerprint(
        last_id=last_id,  # type: ignore[arg-type]
        first_id=first_id,  # type: ignore[arg-type]
        count=count,  # type: ignore[arg-type]
        tokens=tokens,  # type: ignore[arg-type]
        last_activity=last_activity,  # type: ignore[arg-type]
        title=title,  # type: ignore[arg-type]
        metadata=metadata,  # type: ignore[arg-type]
        summary_at=summary_at,  # type: ignore[arg-type]
        reply=reply,  # type: ignore[arg-type]
        branch=branch,  # type: ignore[arg-type]
    )


def fingerprints(connection: sqlite3.Connection, workspace: str) -> dict[str, Fingerprint]:
    """Every conversation of ``workspace`` that exists, by id."""
    return {
        str(row[0]): _fingerprint(row)
        for row in connection.execute(_FINGERPRINT.format(only=""), (workspace,))
    }


def fingerprint(connection: sqlite3.Connection, key: Key) -> Fingerprint | None:
    """One conversation's fingerprint (None: it does not exist)."""
    row = connection.execute(
        _FINGERPRINT.format(only="AND c.conversation = ?"), (key.workspace, key.conversation)
    ).fetchone()
    return _fingerprint(row) if row is not None else None


def growth(connection: sqlite3.Connection, key: Key, after_id: int | None) -> Growth:
    """The rows of the conversation newer than ``after_id`` (None: every row)."""
    rows, tokens = connection.execute(
        "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM messages "
        "WHERE workspace = ? AND conversation = ? AND id > ?",
        (key.workspace, key.conversation, after_id if after_id is not None else 0),
    ).fetchone()
    return Growth(int(rows), int(tokens))


#: SQLite's part of schema version 10 (the marks and the counter; store.schema).
SCHEMA = """
CREATE TABLE IF NOT EXISTS change_marks (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (workspace, conversation)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS change_marks_by_seq ON change_marks (seq);
CREATE TABLE IF NOT EXISTS change_counter (
    only INTEGER PRIMARY KEY CHECK (only = 1),
    seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO change_counter VALUES (1, 0);
"""


def position(connection: sqlite3.Connection) -> int:
    """The change counter now: every mark of a commit seen so far is at or below it."""
    row = connection.execute("SELECT seq FROM change_counter").fetchone()
    return int(row[0]) if row else 0


def changed_in(connection: sqlite3.Connection, workspace: str, after: int) -> set[str]:
    """The conversations of ``workspace`` a commit changed since the counter was ``after``."""
    return {
        str(row[0])
        for row in connection.execute(
            "SELECT conversation FROM change_marks WHERE seq > ? AND workspace = ?",
            (after, workspace),
        )
    }


def changed_keys(connection: sqlite3.Connection, after: int) -> set[Key]:
    """Every conversation a commit changed since the counter was ``after``."""
    return {
        Key(str(row[0]), str(row[1]))
        for row in connection.execute(
            "SELECT workspace, conversation FROM change_marks WHERE seq > ?", (after,)
        )
    }


def mark(connection: sqlite3.Connection, keys: Collection[Key], gone: Collection[Key] = ()) -> None:
    """SQLite's stamp of a write's conversations, just before its commit (the write lock is
    held: this writer is the only one). The marks of ``gone`` (keys whose history no longer
    exists) are deleted instead, so their names leave the file, and the counter's ``floor``
    says so: a reader that last looked below it cannot learn from the marks which of its
    conversations went, and checks them all (``floor``)."""
    if not keys and not gone:
        return
    row = connection.execute("UPDATE change_counter SET seq = seq + 1 RETURNING seq").fetchone()
    forgotten = set(gone)
    connection.executemany(
        "INSERT INTO change_marks (workspace, conversation, seq) VALUES (?, ?, ?) "
        "ON CONFLICT (workspace, conversation) DO UPDATE SET seq = excluded.seq",
        [
            (key.workspace, key.conversation, int(row[0]))
            for key in sorted(keys, key=str)
            if key not in forgotten
        ],
    )
    if forgotten:
        connection.executemany(
            "DELETE FROM change_marks WHERE workspace = ? AND conversation = ?",
            [(key.workspace, key.conversation) for key in sorted(forgotten, key=str)],
        )
        connection.execute("UPDATE change_counter SET floor = ?", (int(row[0]),))


def floor(connection: sqlite3.Connection) -> int:
    """The counter at the newest commit that deleted marks (``mark``'s ``gone``): a reader whose
    position is below it checks which of its conversations still exist."""
    row = connection.execute("SELECT floor FROM change_counter").fetchone()
    return int(row[0]) if row else 0


#: SQLite's schema version 13: the counter's floor (``mark``).
FLOOR_SCHEMA = "ALTER TABLE change_counter ADD COLUMN floor INTEGER NOT NULL DEFAULT 0;"
