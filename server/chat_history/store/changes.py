"""Stateless SQL of the change watch (``service.watch``): each conversation's fingerprint
(policy.changes) and how its rows grew past an id. Every value comes from a primary key or the
``messages_by_conversation`` index: a fingerprint costs a few lookups, not the history."""

from __future__ import annotations

from chat_history.model import Key
from chat_history.policy.changes import Fingerprint, Growth
from chat_history.store.engine import sqlite3

_FINGERPRINT = """
SELECT c.conversation,
    (SELECT MAX(id) FROM messages m WHERE m.workspace = c.workspace
        AND m.conversation = c.conversation),
    (SELECT MIN(id) FROM messages m WHERE m.workspace = c.workspace
        AND m.conversation = c.conversation),
    c.message_count, c.tokens, c.last_activity, c.title, c.metadata,
    (SELECT s.updated_at FROM summaries s WHERE s.workspace = c.workspace
        AND s.conversation = c.conversation),
    (SELECT r.id * 4294967296 + r.revision FROM replies r WHERE r.workspace = c.workspace
        AND r.conversation = c.conversation)
FROM conversations c WHERE c.workspace = ?
"""


def _fingerprint(row: tuple[object, ...]) -> Fingerprint:
    _, last_id, first_id, count, tokens, last_activity, title, metadata, summary_at, reply = row
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
    )


def fingerprints(connection: sqlite3.Connection, workspace: str) -> dict[str, Fingerprint]:
    """Every conversation of ``workspace`` that exists, by id."""
    return {
        str(row[0]): _fingerprint(row) for row in connection.execute(_FINGERPRINT, (workspace,))
    }


def fingerprint(connection: sqlite3.Connection, key: Key) -> Fingerprint | None:
    """One conversation's fingerprint (None: it does not exist)."""
    row = connection.execute(
        _FINGERPRINT + " AND c.conversation = ?", (key.workspace, key.conversation)
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
