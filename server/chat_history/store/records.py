"""Conversation records (protocol.md "Version 2" → Conversations): the client's title and
metadata, when the conversation was created and last written by a client, its summary, and the
listing in activity order with keyset paging. Stateless SQL like ``queries``; the automatic title
is the policy's (``policy.titles``), computed from the rows ``user_rows`` hands out.

A record is the ``conversations`` row. A conversation exists while it has messages, a summary,
a user title or non-empty metadata (stored as NULL when empty); a row that has none of them
(retention emptied the conversation) describes a conversation that does not exist, and the next
write that makes it exist starts its ``created_at`` again."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import attrs

from chat_history.model import Key, Message, Summary
from chat_history.store.engine import sqlite3

#: A conversation exists (c: its record, s: its summary, joined by ``SELECT_FROM``): the one
#: definition, which the listing and ``overview.stats`` share.
EXISTS = (
    "(c.message_count > 0 OR c.title IS NOT NULL OR c.metadata IS NOT NULL "
    "OR s.conversation IS NOT NULL)"
)
#: Records joined with their summaries.
SELECT_FROM = (
    "FROM conversations c LEFT JOIN summaries s "
    "ON s.workspace = c.workspace AND s.conversation = c.conversation"
)
_SELECT = (
    "SELECT c.workspace, c.conversation, c.title, c.created_at, c.last_activity, "
    f"c.message_count, c.tokens, s.conversation IS NOT NULL, c.metadata {SELECT_FROM}"
)
#: Listing order: newest activity first, then conversationId, then workspace (policy.cursor).
_ORDER = " ORDER BY c.last_activity DESC, c.conversation, c.workspace"
#: Strictly after a page's last conversation in that order.
_AFTER = (
    " AND (c.last_activity < ? OR (c.last_activity = ? AND (c.conversation > ? "
    "OR (c.conversation = ? AND c.workspace > ?))))"
)


@attrs.frozen
class RecordRow:
    """One conversation's record as stored: the one record type of the store, which
    ``conversations.describe`` turns into the ConversationInfo every listing answers with (the
    automatic title is not stored)."""

    workspace: str
    conversation: str
    #: the client's title (None: none set)
    title: str | None
    created_at: int | None
    last_activity: int | None
    message_count: int
    tokens: int
    has_summary: bool
    #: the metadata's compact JSON text (None: empty), never parsed here
    metadata: str | None

    @property
    def key(self) -> Key:
        """The (workspace, conversation) pair naming it."""
        return Key(self.workspace, self.conversation)


def _record(row: tuple[Any, ...]) -> RecordRow:
    workspace, conversation, title, created, active, count, tokens, summary, metadata = row
    return RecordRow(
        workspace,
        conversation,
        title,
        created,
        active,
        count,
        tokens,
        bool(summary),
        metadata or None,
    )


def record(connection: sqlite3.Connection, key: Key) -> RecordRow | None:
    """The conversation's record, None when it does not exist."""
    row = connection.execute(
        f"{_SELECT} WHERE c.workspace = ? AND c.conversation = ? AND {EXISTS}",
        (key.workspace, key.conversation),
    ).fetchone()
    return _record(row) if row is not None else None


def exists(connection: sqlite3.Connection, key: Key) -> bool:
    """Whether the conversation exists (its record is not read: every write asks)."""
    row = connection.execute(
        f"SELECT 1 {SELECT_FROM} WHERE c.workspace = ? AND c.conversation = ? AND {EXISTS}",
        (key.workspace, key.conversation),
    ).fetchone()
    return row is not None


def listing(
    connection: sqlite3.Connection,
    workspace: str | None,
    after: tuple[int, str, str] | None,
    limit: int | None,
) -> list[RecordRow]:
    """The existing conversations of ``workspace`` (every workspace when None) in listing order,
    those after ``after`` (last_activity, conversation, workspace) only, at most ``limit``."""
    where = [EXISTS]
    args: list[Any] = []
    if workspace is not None:
        where.append("c.workspace = ?")
        args.append(workspace)
    query = f"{_SELECT} WHERE {' AND '.join(where)}"
    if after is not None:
        activity, conversation, in_workspace = after
        query += _AFTER
        args += [activity, activity, conversation, conversation, in_workspace]
    query += _ORDER
    if limit is not None:
        query += " LIMIT ?"
        args.append(limit)
    return [_record(row) for row in connection.execute(query, args)]


def user_rows(connection: sqlite3.Connection, key: Key) -> Generator[Message, None, None]:
    """The conversation's user rows oldest first, read a few at a time as they are consumed
    (the automatic title is usually the first)."""
    cursor = connection.execute(
        "SELECT content FROM messages WHERE workspace = ? AND conversation = ? AND role = 'user' "
        "ORDER BY id",
        (key.workspace, key.conversation),
    )
    try:
        while batch := cursor.fetchmany(8):
            for (content,) in batch:
                yield Message(role="user", content=content)
    finally:
        cursor.close()


def touch(connection: sqlite3.Connection, key: Key, now: int, *, created: bool) -> None:
    """A client wrote to the conversation at ``now``: its record (made when missing) is active
    since then; ``created``: the conversation did not exist before this write."""
    connection.execute(
        "INSERT INTO conversations (workspace, conversation, message_count, tokens, last_turn, "
        "turn_start_id, oldest_timestamp, last_activity, created_at) "
        "VALUES (?, ?, 0, 0, 0, 0, NULL, ?, ?) ON CONFLICT (workspace, conversation) DO UPDATE "
        "SET last_activity = excluded.last_activity, created_at = CASE WHEN ? OR "
        "conversations.created_at IS NULL THEN excluded.created_at "
        "ELSE conversations.created_at END",
        (key.workspace, key.conversation, now, now, created),
    )


def ensure(connection: sqlite3.Connection, key: Key, at: int) -> None:
    """The conversation has a record (made, created and active ``at``, when missing): a summary
    saved without rows has one too, so the listing finds it."""
    connection.execute(
        "INSERT INTO conversations (workspace, conversation, message_count, tokens, last_turn, "
        "turn_start_id, oldest_timestamp, last_activity, created_at) "
        "VALUES (?, ?, 0, 0, 0, 0, NULL, ?, ?) ON CONFLICT (workspace, conversation) DO NOTHING",
        (key.workspace, key.conversation, at, at),
    )


def set_created(connection: sqlite3.Connection, key: Key, now: int) -> None:
    """The conversation starts existing at ``now`` (its first rows were just inserted)."""
    connection.execute(
        "UPDATE conversations SET created_at = ? WHERE workspace = ? AND conversation = ?",
        (now, key.workspace, key.conversation),
    )


def set_title(connection: sqlite3.Connection, key: Key, title: str | None) -> None:
    """Store the client's title (None: back to the automatic one)."""
    connection.execute(
        "UPDATE conversations SET title = ? WHERE workspace = ? AND conversation = ?",
        (title, key.workspace, key.conversation),
    )


def set_metadata(connection: sqlite3.Connection, key: Key, text: str | None) -> None:
    """Store the metadata's compact JSON text (None: empty)."""
    connection.execute(
        "UPDATE conversations SET metadata = ? WHERE workspace = ? AND conversation = ?",
        (text, key.workspace, key.conversation),
    )


# -- summaries ------------------------------------------------------------------------------------


def summary(connection: sqlite3.Connection, key: Key) -> Summary | None:
    """The conversation's summary, or None."""
    row = connection.execute(
        "SELECT summary, updated_at, covers_through_id FROM summaries WHERE workspace = ? "
        "AND conversation = ?",
        (key.workspace, key.conversation),
    ).fetchone()
    if row is None:
        return None
    return Summary(summary=row[0], updated_at=row[1], covers_through_id=row[2])


def save_summary(connection: sqlite3.Connection, key: Key, saved: Summary) -> bool:
    """Save the conversation's summary; returns whether it replaced one (whose text then needs a
    WAL reset to be gone from the files)."""
    replaced = (
        connection.execute(
            "SELECT 1 FROM summaries WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        ).fetchone()
        is not None
    )
    connection.execute(
        "INSERT INTO summaries (workspace, conversation, summary, updated_at, "
        "covers_through_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, conversation) DO "
        "UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at, "
        "covers_through_id = excluded.covers_through_id",
        (key.workspace, key.conversation, saved.summary, saved.updated_at, saved.covers_through_id),
    )
    return replaced
