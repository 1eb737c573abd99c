"""Stateless SQL of provider state (protocol.md "Version 5" → Provider state that stays valid):
each row's origin and fences (the ``messages.origin`` column, schema step 14) and a
conversation's native compaction (``compactions``), shared by both engines. A compaction goes
with the rows it covers: deleting any of them deletes it (``forget_covering``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chat_history.model import Fence, Key, NativeCompaction, Origin, compact_json
from chat_history.store.engine import sqlite3

SCHEMA = """
ALTER TABLE messages ADD COLUMN origin TEXT;
CREATE TABLE compactions (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    covers_through_id INTEGER NOT NULL,
    items TEXT NOT NULL,
    origin TEXT NOT NULL,
    saved_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, conversation)
) WITHOUT ROWID
"""

_WHERE = "workspace = ? AND conversation = ?"


def _key(key: Key) -> tuple[str, str]:
    return (key.workspace, key.conversation)


def origin_text(origin: Origin | None, fences: Sequence[Fence]) -> str | None:
    """The ``origin`` column of a row (or a compaction): the origin's fields, and ``fenced``
    when a target refused some of its state; NULL when it has neither."""
    if origin is None and not fences:
        return None
    value: dict[str, Any] = origin.as_json() if origin is not None else {}
    if fences:
        value["fenced"] = [fence.as_json() for fence in fences]
    return compact_json(value)


def origin_of(text: str | None) -> tuple[Origin | None, tuple[Fence, ...]]:
    """A stored ``origin`` column read back: the origin (None when it names none) and the
    fences."""
    if not text:
        return None, ()
    value = json.loads(text)
    found = Origin.from_json(value) if "provider" in value else None
    return found, tuple(Fence.from_json(f) for f in value.get("fenced", ()))


def set_origin(
    connection: sqlite3.Connection,
    key: Key,
    row_id: int,
    origin: Origin | None,
    fences: Sequence[Fence],
) -> None:
    """Row ``row_id``'s origin and fences replaced."""
    connection.execute(
        f"UPDATE messages SET origin = ? WHERE id = ? AND {_WHERE}",
        (origin_text(origin, fences), row_id, *_key(key)),
    )


def compaction(connection: sqlite3.Connection, key: Key) -> NativeCompaction | None:
    """The conversation's native compaction, or None."""
    row = connection.execute(
        f"SELECT items, covers_through_id, origin, saved_at FROM compactions WHERE {_WHERE}",
        _key(key),
    ).fetchone()
    if row is None:
        return None
    origin, fences = origin_of(row[2])
    assert origin is not None, "a compaction is saved with its origin"
    return NativeCompaction(
        items=tuple(json.loads(row[0])),
        covers_through_id=int(row[1]),
        origin=origin,
        saved_at=int(row[3]),
        fences=fences,
    )


def save_compaction(connection: sqlite3.Connection, key: Key, saved: NativeCompaction) -> bool:
    """Save the conversation's native compaction; returns whether it replaced one."""
    replaced = (
        connection.execute(f"SELECT 1 FROM compactions WHERE {_WHERE}", _key(key)).fetchone()
        is not None
    )
    connection.execute(
        "INSERT INTO compactions (workspace, conversation, covers_through_id, items, origin, "
        "saved_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, conversation) DO UPDATE "
        "SET covers_through_id = excluded.covers_through_id, items = excluded.items, "
        "origin = excluded.origin, saved_at = excluded.saved_at",
        (
            *_key(key),
            saved.covers_through_id,
            compact_json(list(saved.items)),
            origin_text(saved.origin, saved.fences),
            saved.saved_at,
        ),
    )
    return replaced


def fence_compaction(connection: sqlite3.Connection, key: Key, saved: NativeCompaction) -> None:
    """The compaction's fences replaced by ``saved``'s."""
    connection.execute(
        f"UPDATE compactions SET origin = ? WHERE {_WHERE}",
        (origin_text(saved.origin, saved.fences), *_key(key)),
    )


def forget_covering(connection: sqlite3.Connection, key: Key, deleted: Sequence[int]) -> bool:
    """Delete the compaction when it covers any of the ``deleted`` row ids; returns whether
    it did."""
    if not deleted:
        return False
    cursor = connection.execute(
        f"DELETE FROM compactions WHERE {_WHERE} AND covers_through_id >= ?",
        (*_key(key), min(deleted)),
    )
    return cursor.rowcount > 0
