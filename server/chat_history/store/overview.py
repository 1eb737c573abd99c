"""Questions about the whole database rather than one conversation: the counts of the CLI's
``stats``. Stateless, like ``queries``; the listing of conversations is ``records.listing``, and
a conversation counts here exactly when that listing shows it (``records.EXISTS``)."""

from __future__ import annotations

import attrs

from chat_history.store.engine import sqlite3
from chat_history.store.records import EXISTS, SELECT_FROM


@attrs.frozen
class DatabaseStats:
    """What ``chat-history stats`` reports of the whole database: rows, existing conversations
    and the workspaces holding them, summaries, and the oldest and newest row's timestamp."""

    messages: int
    conversations: int
    workspaces: int
    summaries: int
    oldest_timestamp: int | None
    newest_timestamp: int | None


def stats(connection: sqlite3.Connection) -> DatabaseStats:
    """The database's totals; a conversation holding only a title or metadata counts, as the
    listing shows it."""
    messages, oldest, newest = connection.execute(
        "SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM messages"
    ).fetchone()
    conversations, workspaces = connection.execute(
        f"SELECT COUNT(*), COUNT(DISTINCT c.workspace) {SELECT_FROM} WHERE {EXISTS}"
    ).fetchone()
    (summaries,) = connection.execute("SELECT COUNT(*) FROM summaries").fetchone()
    return DatabaseStats(messages, conversations, workspaces, summaries, oldest, newest)
