"""Stateless SQL of replies in flight (protocol.md "Version 4" → Replies in flight), shared by
both engines (PostgreSQL through ``store.postgres.dialect``).

A streaming row is a ``messages`` row with status ``'streaming'`` and content ``''`` (so search
never sees it before it ends), and one ``replies`` row holding its text and its lease:

- ``content`` holds the text folded so far and ``reply_parts`` the deltas since, one row each
  (``seq``: the reply's revision when it came). An update writes one small part row and one
  small ``replies`` row, whatever the reply's length; every ``FOLD_PARTS`` parts are folded into
  ``content`` (one copy of the text), so reading a streaming row joins few parts. Reads select
  ``rows.STREAMING_TEXT`` for its text.
- ``writer`` names the process streaming it and ``lease_until`` (epoch ms) how long it is taken
  as alive: the writer renews it while it runs; an expired lease is taken as a writer gone.
- ``revision`` moves with every change: the change watch's fingerprint reads it.
- One streaming reply per conversation: a unique index on (workspace, conversation). The key
  is the history's (``store.workspaces.KEYED``), so every re-keying (``moveWorkspace``, an old
  spelling or a symlink re-keyed, an identity change) carries the reply with its row; its
  writer finds it by its row id (``by_id``), which no re-keying changes.
- A streaming row deleted by any path (``truncate``, ``deleteTurns``, ``clear``, plain SQL)
  takes its reply and parts with it (a trigger), so no reply outlives its row.

When the reply ends, its text goes into ``messages.content`` (with its fold, so search finds it)
and both tables forget it: deleted rows of them are zeroed by SQLite's ``secure_delete`` and
rewritten away by PostgreSQL's purge (``PURGED_TABLES``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from chat_history.model import Key
from chat_history.store.engine import sqlite3

#: Schema step 10 of SQLite (store.schema); PostgreSQL's is its version 4 (postgres.schema).
SCHEMA = """
ALTER TABLE messages ADD COLUMN status TEXT;
CREATE TABLE replies (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    content TEXT NOT NULL,
    length INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    writer TEXT NOT NULL,
    lease_until INTEGER NOT NULL
);
CREATE UNIQUE INDEX replies_one_per_conversation ON replies (workspace, conversation);
CREATE INDEX replies_by_lease ON replies (lease_until);
CREATE TABLE reply_parts (
    reply INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (reply, seq)
) WITHOUT ROWID;
CREATE TRIGGER messages_reply_delete AFTER DELETE ON messages
WHEN old.status = 'streaming' BEGIN
    DELETE FROM reply_parts WHERE reply = old.id;
    DELETE FROM replies WHERE id = old.id;
END;
"""

#: Parts kept before they are folded into the reply's text (a copy of it every so many updates).
FOLD_PARTS = 64

_TEXT = (
    "SELECT r.content || COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) "
    "FROM reply_parts p WHERE p.reply = r.id), '') FROM replies r WHERE r.id = ?"
)


@attrs.frozen
class Reply:
    """A streaming row's reply: its row id, its length (code points), who streams it, until
    when its lease holds (epoch ms) and the conversation it is in now."""

    id: int
    length: int
    writer: str
    lease_until: int
    key: Key


@attrs.frozen
class Held:
    """A reply some writer holds: where it is."""

    key: Key
    id: int


_REPLY = "SELECT id, length, writer, lease_until, workspace, conversation FROM replies WHERE "


def streaming(connection: sqlite3.Connection, key: Key) -> Reply | None:
    """The conversation's streaming reply (None: none streams)."""
    return _reply(
        connection.execute(
            _REPLY + "workspace = ? AND conversation = ?", (key.workspace, key.conversation)
        ).fetchone()
    )


def by_id(connection: sqlite3.Connection, row_id: int) -> Reply | None:
    """The reply of row ``row_id``, wherever re-keying took it (None: the row is not streaming)."""
    return _reply(connection.execute(_REPLY + "id = ?", (row_id,)).fetchone())


def _reply(found: Any) -> Reply | None:
    if found is None:
        return None
    row_id, length, writer, until, workspace, conversation = found
    return Reply(int(row_id), int(length), str(writer), int(until), Key(workspace, conversation))


def start(
    connection: sqlite3.Connection, key: Key, row_id: int, text: str, writer: str, until: int
) -> None:
    """Row ``row_id`` streams from now on, its text ``text``: the row's own text leaves the
    ``messages`` column (and with it the search index) until the reply ends."""
    connection.execute(
        "INSERT INTO replies (id, workspace, conversation, content, length, parts, revision, "
        "writer, lease_until) VALUES (?, ?, ?, ?, ?, 0, 1, ?, ?)",
        (row_id, key.workspace, key.conversation, text, len(text), writer, until),
    )
    connection.execute(
        "UPDATE messages SET content = '', folded = NULL, status = 'streaming' WHERE id = ?",
        (row_id,),
    )


def add_part(connection: sqlite3.Connection, row_id: int, delta: str, until: int) -> int:
    """Append ``delta`` to the reply's text and renew its lease; returns the text's length."""
    revision, length, parts = connection.execute(
        "UPDATE replies SET length = length + ?, parts = parts + 1, revision = revision + 1, "
        "lease_until = ? WHERE id = ? RETURNING revision, length, parts",
        (len(delta), until, row_id),
    ).fetchone()
    connection.execute("INSERT INTO reply_parts VALUES (?, ?, ?)", (row_id, revision, delta))
    if parts >= FOLD_PARTS:
        connection.execute(
            "UPDATE replies SET content = content || (SELECT group_concat(p.text, '' ORDER BY "
            "p.seq) FROM reply_parts p WHERE p.reply = replies.id), parts = 0 WHERE id = ?",
            (row_id,),
        )
        connection.execute("DELETE FROM reply_parts WHERE reply = ?", (row_id,))
    return int(length)


def replace_text(connection: sqlite3.Connection, row_id: int, text: str, until: int) -> int:
    """The reply's text becomes ``text`` and its lease is renewed; returns its length."""
    connection.execute("DELETE FROM reply_parts WHERE reply = ?", (row_id,))
    connection.execute(
        "UPDATE replies SET content = ?, length = ?, parts = 0, revision = revision + 1, "
        "lease_until = ? WHERE id = ?",
        (text, len(text), until, row_id),
    )
    return len(text)


def set_columns(
    connection: sqlite3.Connection, row_id: int, tool_calls: str | None, provider_data: str | None
) -> None:
    """The streaming row's tool calls and providerData (their JSON columns) replaced."""
    connection.execute(
        "UPDATE messages SET tool_calls = ?, provider_data = ? WHERE id = ?",
        (tool_calls, provider_data, row_id),
    )
    connection.execute("UPDATE replies SET revision = revision + 1 WHERE id = ?", (row_id,))


def text(connection: sqlite3.Connection, row_id: int) -> str:
    """The reply's whole text as it stands."""
    found = connection.execute(_TEXT, (row_id,)).fetchone()
    return str(found[0]) if found and found[0] is not None else ""


def forget(connection: sqlite3.Connection, row_id: int, status: str | None) -> None:
    """The reply ended: its row takes ``status`` (NULL: complete); its reply and parts go (the
    caller writes the row's final text)."""
    connection.execute("UPDATE messages SET status = ? WHERE id = ?", (status, row_id))
    connection.execute("DELETE FROM reply_parts WHERE reply = ?", (row_id,))
    connection.execute("DELETE FROM replies WHERE id = ?", (row_id,))


def renew(connection: sqlite3.Connection, writer: str, ids: Sequence[int], until: int) -> None:
    """The writer's leases on ``ids`` hold until ``until``."""
    for row_id in ids:
        connection.execute(
            "UPDATE replies SET lease_until = ? WHERE id = ? AND writer = ?",
            (until, row_id, writer),
        )


def expired(connection: sqlite3.Connection, now: int) -> list[Held]:
    """Every reply whose lease ended before ``now`` (its writer is gone)."""
    return _held(
        connection.execute(
            "SELECT workspace, conversation, id FROM replies WHERE lease_until < ? ORDER BY id",
            (now,),
        )
    )


def held_by(connection: sqlite3.Connection, writer: str) -> list[Held]:
    """Every reply ``writer`` streams."""
    return _held(
        connection.execute(
            "SELECT workspace, conversation, id FROM replies WHERE writer = ? ORDER BY id",
            (writer,),
        )
    )


def streaming_turns(connection: sqlite3.Connection, key: Key) -> frozenset[int]:
    """The turns of the conversation's streaming rows (retention never deletes them)."""
    return frozenset(
        int(row[0])
        for row in connection.execute(
            "SELECT m.turn FROM replies r JOIN messages m ON m.id = r.id "
            "WHERE r.workspace = ? AND r.conversation = ?",
            (key.workspace, key.conversation),
        )
    )


def _held(cursor: sqlite3.Cursor) -> list[Held]:
    return [Held(Key(str(w), str(c)), int(i)) for w, c, i in cursor.fetchall()]
