"""Stateless SQL on one conversation: each function runs inside the caller's transaction on the
connection it is given, remembers nothing and never sees the cache (``transaction`` adds those)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from chat_history.model import Key, Message, StoredMessage, Summary
from chat_history.policy.search.folding import stored_fold
from chat_history.store import provider_state, search_index
from chat_history.store.engine import sqlite3
from chat_history.store.rows import COLUMNS, message_columns, status_column, to_message
from chat_history.store.schema import FIGURES

#: Higher than any row id.
NO_ID = 1 << 62

_ADD_FIGURES = f"INSERT INTO turn_figures VALUES (?, ?, ?, {', '.join('?' * (2 * len(FIGURES)))})"
#: The running sums through the newest recorded turn: its own figures plus its ``earlier_``.
_LAST_FIGURES = (
    f"SELECT {', '.join(f'{n} + earlier_{n}' for n in FIGURES)} FROM turn_figures "
    "WHERE workspace = ? AND conversation = ? ORDER BY turn DESC LIMIT 1"
)
#: A new row's id is one more than any id the table holds or ever deleted (schema v3).
_INSERT_MESSAGE = (
    "INSERT INTO messages (id, workspace, conversation, turn, role, content, tool_calls, "
    "tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens, folded, status, "
    "origin) VALUES ((SELECT MAX(highest_deleted, COALESCE((SELECT MAX(id) FROM messages), 0)) "
    "+ 1 FROM id_floor), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_TOTALS = (
    "UPDATE conversations SET message_count = ?, tokens = ?, last_turn = ?, turn_start_id = ?, "
    "oldest_timestamp = ?, last_activity = ? WHERE workspace = ? AND conversation = ?"
)
_INSERT_TOTALS = (
    "INSERT INTO conversations (message_count, tokens, last_turn, turn_start_id, "
    "oldest_timestamp, last_activity, workspace, conversation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Run before deleting messages, so no id is handed out twice (schema v3).
_RAISE_ID_FLOOR = (
    "UPDATE id_floor SET highest_deleted = (SELECT MAX(id) FROM messages) "
    "WHERE (SELECT MAX(id) FROM messages) > highest_deleted"
)


@attrs.frozen
class ConversationTotals:
    """The ``conversations`` row: what retention and appends check without reading rows."""

    message_count: int
    tokens: int
    last_turn: int
    turn_start_id: int
    oldest_timestamp: int | None
    last_activity: int


@attrs.frozen
class RowMetaRecord:
    """A row as retention plans on it: no content, only what its rules weigh."""

    id: int
    turn: int
    role: str
    tokens: int
    timestamp: int


def data_version(connection: sqlite3.Connection) -> int:
    """Changes whenever another connection commits (SQLite's ``PRAGMA data_version``)."""
    return int(connection.execute("PRAGMA data_version").fetchone()[0])


# -- messages ---------------------------------------------------------------------------------


def totals(connection: sqlite3.Connection, key: Key) -> ConversationTotals | None:
    """The conversation's stored totals (count, tokens, last turn and where it starts, oldest row,
    last activity); None when it has no record."""
    row = connection.execute(
        "SELECT message_count, tokens, last_turn, turn_start_id, oldest_timestamp, "
        "last_activity FROM conversations WHERE workspace = ? AND conversation = ?",
        (key.workspace, key.conversation),
    ).fetchone()
    return ConversationTotals(*row) if row else None


def rows_from(connection: sqlite3.Connection, key: Key, first_id: int) -> list[StoredMessage]:
    """The rows with ids from ``first_id`` on, in order."""
    return [
        to_message(r)
        for r in connection.execute(
            f"SELECT {COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
            "AND id >= ? ORDER BY id",
            (key.workspace, key.conversation, first_id),
        )
    ]


def rows_before(
    connection: sqlite3.Connection, key: Key, before_id: int, limit: int | None = None
) -> sqlite3.Cursor:
    """A cursor over the rows older than ``before_id``, newest first (as raw rows, for
    ``to_message``), at most ``limit`` of them."""
    query = (
        f"SELECT {COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
        "AND id < ? ORDER BY id DESC"
    )
    if limit is None:
        return connection.execute(query, (key.workspace, key.conversation, before_id))
    return connection.execute(
        query + " LIMIT ?", (key.workspace, key.conversation, before_id, limit)
    )


def system_rows(connection: sqlite3.Connection, key: Key, before_id: int) -> list[StoredMessage]:
    """The system rows older than ``before_id``, in order (the partial index of v2)."""
    return [
        to_message(r)
        for r in connection.execute(
            f"SELECT {COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
            "AND role = 'system' AND id < ? ORDER BY id",
            (key.workspace, key.conversation, before_id),
        )
    ]


def oldest_spoken(connection: sqlite3.Connection, key: Key) -> tuple[int, int] | None:
    """The (id, turn number) of the oldest non-system row."""
    row = connection.execute(
        "SELECT id, turn FROM messages WHERE workspace = ? AND conversation = ? "
        "AND role != 'system' ORDER BY id LIMIT 1",
        (key.workspace, key.conversation),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def oldest_spoken_turn(connection: sqlite3.Connection, key: Key) -> int | None:
    """The turn number of the oldest non-system row."""
    oldest = oldest_spoken(connection, key)
    return oldest[1] if oldest is not None else None


def has_row(connection: sqlite3.Connection, key: Key, row_id: int) -> bool:
    """Whether ``row_id`` is a row of the conversation."""
    return (
        connection.execute(
            "SELECT 1 FROM messages WHERE workspace = ? AND conversation = ? AND id = ?",
            (key.workspace, key.conversation, row_id),
        ).fetchone()
        is not None
    )


def turn_after(connection: sqlite3.Connection, key: Key, row_id: int) -> int | None:
    """The turn number of the oldest row newer than ``row_id`` (None: there is none)."""
    row = connection.execute(
        "SELECT turn FROM messages WHERE workspace = ? AND conversation = ? AND id > ? "
        "ORDER BY id LIMIT 1",
        (key.workspace, key.conversation, row_id),
    ).fetchone()
    return int(row[0]) if row else None


def rows_after(connection: sqlite3.Connection, key: Key, after_id: int) -> sqlite3.Cursor:
    """A cursor over the rows newer than ``after_id``, oldest first (raw rows, for
    ``to_message``), fetched as it is consumed."""
    return connection.execute(
        f"SELECT {COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
        "AND id > ? ORDER BY id",
        (key.workspace, key.conversation, after_id),
    )


def row_meta(connection: sqlite3.Connection, key: Key) -> list[RowMetaRecord]:
    """What retention plans on: every row's id, turn, role, tokens and timestamp, in order."""
    return [
        RowMetaRecord(*r)
        for r in connection.execute(
            "SELECT id, turn, role, tokens, timestamp FROM messages WHERE workspace = ? "
            "AND conversation = ? ORDER BY id",
            (key.workspace, key.conversation),
        )
    ]


def insert_row(
    connection: sqlite3.Connection, key: Key, message: Message, turn: int, tokens: int, at: int
) -> int:
    """Insert one row stamped ``at``; returns its id."""
    cursor = connection.execute(
        _INSERT_MESSAGE,
        (
            key.workspace,
            key.conversation,
            turn,
            *message_columns(message, at),
            tokens,
            stored_fold(message.content),
            status_column(message),
            provider_state.origin_text(message.origin, message.fences),
        ),
    )
    return int(cursor.lastrowid or 0)


def write_totals(
    connection: sqlite3.Connection, key: Key, after: ConversationTotals, *, existed: bool
) -> None:
    """Store the conversation's totals: update its record, or make it when none ``existed``."""
    connection.execute(
        _UPDATE_TOTALS if existed else _INSERT_TOTALS,
        (
            after.message_count,
            after.tokens,
            after.last_turn,
            after.turn_start_id,
            after.oldest_timestamp,
            after.last_activity,
            key.workspace,
            key.conversation,
        ),
    )


def delete_rows(connection: sqlite3.Connection, key: Key, ids: Sequence[int]) -> None:
    """Delete rows by id, recompute the conversation's totals from what is left, and drop the
    figures of turns older than the oldest one left."""
    connection.execute(_RAISE_ID_FLOOR)
    through = search_index.indexed_through(connection)
    bulk = search_index.begin_bulk_delete(connection, sum(i <= through for i in ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        connection.execute(
            f"DELETE FROM messages WHERE workspace = ? AND conversation = ? AND id IN "
            f"({','.join('?' * len(chunk))})",
            (key.workspace, key.conversation, *chunk),
        )
    if bulk:
        search_index.end_bulk_delete(connection)
    provider_state.forget_covering(connection, key, ids)
    count, tokens, oldest = connection.execute(
        "SELECT COUNT(*), COALESCE(SUM(tokens), 0), MIN(timestamp) FROM messages "
        "WHERE workspace = ? AND conversation = ?",
        (key.workspace, key.conversation),
    ).fetchone()
    connection.execute(
        "UPDATE conversations SET message_count = ?, tokens = ?, oldest_timestamp = ? "
        "WHERE workspace = ? AND conversation = ?",
        (count, tokens, oldest, key.workspace, key.conversation),
    )
    oldest_turn = oldest_spoken_turn(connection, key)
    connection.execute(
        "DELETE FROM turn_figures WHERE workspace = ? AND conversation = ? AND turn < ?",
        (key.workspace, key.conversation, NO_ID if oldest_turn is None else oldest_turn),
    )


def clear(connection: sqlite3.Connection, key: Key) -> int:
    """Delete the conversation: rows, summary, totals, figures. Returns the rows deleted."""
    connection.execute(_RAISE_ID_FLOOR)
    where, params = "workspace = ? AND conversation = ?", (key.workspace, key.conversation)
    bulk = search_index.begin_bulk_delete(
        connection, search_index.indexed_rows(connection, where, params)
    )
    deleted = connection.execute(f"DELETE FROM messages WHERE {where}", params).rowcount
    if bulk:
        search_index.end_bulk_delete(connection)
    for table in ("summaries", "conversations", "turn_figures", "compactions"):
        connection.execute(
            f"DELETE FROM {table} WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        )
    return int(deleted)


# -- turn figures -----------------------------------------------------------------------------


def last_figure_sums(connection: sqlite3.Connection, key: Key) -> tuple[int, ...]:
    """The running sums through the newest recorded turn (zeros when none is)."""
    last = connection.execute(_LAST_FIGURES, (key.workspace, key.conversation)).fetchone()
    return tuple(last) if last else (0,) * len(FIGURES)


def add_figures(
    connection: sqlite3.Connection,
    key: Key,
    turn: int,
    own: Sequence[int],
    earlier: Sequence[int],
) -> None:
    """Record a completed turn's figures and the running sums of the turns before it (what prepare's
    read plan starts from)."""
    connection.execute(_ADD_FIGURES, (key.workspace, key.conversation, turn, *own, *earlier))


def figure_rows(
    connection: sqlite3.Connection, key: Key, turns: Iterable[int]
) -> dict[int, tuple[int, ...]]:
    """turn -> its own figures then its running sums, for those of ``turns`` recorded."""
    wanted = list(turns)
    return {
        r[0]: tuple(r[1:])
        for r in connection.execute(
            f"SELECT turn, {', '.join(FIGURES)}, {', '.join(f'earlier_{n}' for n in FIGURES)} "
            f"FROM turn_figures WHERE workspace = ? AND conversation = ? AND turn IN "
            f"({', '.join('?' * len(wanted))})",
            (key.workspace, key.conversation, *wanted),
        )
    }


# -- summaries --------------------------------------------------------------------------------


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
