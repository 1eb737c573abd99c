"""Questions about the whole database rather than one conversation: the listings and counts of
the list methods and the CLI's ``list`` and ``stats``. Stateless, like ``queries``."""

from __future__ import annotations

import attrs

from chat_history.store.engine import sqlite3


@attrs.frozen
class DatabaseStats:
    messages: int
    conversations: int
    workspaces: int
    summaries: int
    oldest_timestamp: int | None
    newest_timestamp: int | None


@attrs.frozen
class ConversationRecord:
    conversation: str
    message_count: int
    tokens: int
    last_activity: int
    has_summary: bool


def conversations(connection: sqlite3.Connection, workspace: str) -> list[ConversationRecord]:
    """The workspace's conversations with rows or a summary, most recently active first."""
    rows = connection.execute(
        "SELECT c.conversation, c.message_count, c.tokens, c.last_activity, "
        "s.conversation IS NOT NULL FROM conversations c LEFT JOIN summaries s "
        "ON s.workspace = c.workspace AND s.conversation = c.conversation "
        "WHERE c.workspace = ? AND (c.message_count > 0 OR s.conversation IS NOT NULL) "
        "UNION ALL SELECT s.conversation, 0, 0, s.updated_at, 1 FROM summaries s "
        "WHERE s.workspace = ? AND NOT EXISTS (SELECT 1 FROM conversations c WHERE "
        "c.workspace = s.workspace AND c.conversation = s.conversation)",
        (workspace, workspace),
    ).fetchall()
    records = [ConversationRecord(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]
    return sorted(records, key=lambda r: (-r.last_activity, r.conversation))


def workspaces(connection: sqlite3.Connection) -> list[str]:
    """Every workspace that holds messages or a summary, sorted."""
    return [
        r[0]
        for r in connection.execute(
            "SELECT workspace FROM conversations WHERE message_count > 0 UNION "
            "SELECT workspace FROM summaries ORDER BY 1"
        )
    ]


def stats(connection: sqlite3.Connection) -> DatabaseStats:
    messages, oldest, newest = connection.execute(
        "SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM messages"
    ).fetchone()
    conversations, workspaces = connection.execute(
        "SELECT COUNT(*), COUNT(DISTINCT workspace) FROM (SELECT workspace, conversation FROM "
        "conversations WHERE message_count > 0 UNION SELECT workspace, conversation FROM "
        "summaries)"
    ).fetchone()
    (summaries,) = connection.execute("SELECT COUNT(*) FROM summaries").fetchone()
    return DatabaseStats(messages, conversations, workspaces, summaries, oldest, newest)
