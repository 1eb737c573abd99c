"""Stateless SQL of the edits a client asks for (protocol.md "Version 2" → Edit, rewind, branch):
delete from a row on, delete turns, replace one row, copy a conversation. Each costs what it
touches — the rows it reads, deletes or copies and the turns after an edited one — not the
length of the history: rows are found by id (the primary key) or by turn (``messages_by_turn``),
and the totals are adjusted by what changed rather than summed again.

Turn figures (``turn_figures``, read by ``prepare``'s read plan) stay true: the running turn has
none (the turn that is last after a deletion is running again), an edited turn's figures are
replaced and every later turn's running sums moved by the difference, and where a deletion
leaves a gap in the turn numbers the figures up to it are dropped (a range of turns across a gap
would count a turn that is not there; ``prepare`` then reads those turns' rows instead)."""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.model import Key, StoredMessage
from chat_history.policy.search.folding import stored_fold
from chat_history.store import provider_state, queries
from chat_history.store.engine import sqlite3
from chat_history.store.rows import (
    COLUMNS,
    STREAMING_TEXT,
    message_columns,
    origin_column,
    to_message,
)
from chat_history.store.schema import FIGURES

_WHERE = "workspace = ? AND conversation = ?"
_NEXT_ID = (
    "(SELECT MAX(highest_deleted, COALESCE((SELECT MAX(id) FROM messages), 0)) FROM id_floor)"
)


#: copy's statements, by name (the PostgreSQL dialect has its own form of both): the id before
#: the copies' block, and the copies (ids base + 1, ...).
ID_BEFORE_COPY = f"SELECT {_NEXT_ID}"
COPY_ROWS = (
    "INSERT INTO messages (id, workspace, conversation, turn, role, content, tool_calls, "
    "tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens, folded, "
    "status, origin) SELECT ? + ROW_NUMBER() OVER (ORDER BY id), ?, ?, turn, role, "
    f"CASE WHEN status = 'streaming' THEN {STREAMING_TEXT} ELSE content END, tool_calls, "
    "tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens, folded, "
    # A reply streaming in the source is a cut reply in the copy (nothing streams into it).
    "CASE WHEN status IS NULL THEN NULL ELSE 'interrupted' END, origin "
    f"FROM messages WHERE {_WHERE} AND id <= ? ORDER BY id"
)


def _key(key: Key) -> tuple[str, str]:
    return (key.workspace, key.conversation)


def row(connection: sqlite3.Connection, key: Key, row_id: int) -> StoredMessage | None:
    """The conversation's row ``row_id`` (None: no such row in this conversation)."""
    found = connection.execute(
        f"SELECT {COLUMNS} FROM messages WHERE id = ? AND {_WHERE}", (row_id, *_key(key))
    ).fetchone()
    return to_message(found) if found is not None else None


def rows_of_turns(
    connection: sqlite3.Connection, key: Key, turns: Sequence[int]
) -> list[StoredMessage]:
    """Every row of the named turns, in order."""
    wanted = sorted(set(turns))
    found: list[StoredMessage] = []
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found += [
            to_message(r)
            for r in connection.execute(
                f"SELECT {COLUMNS} FROM messages WHERE {_WHERE} AND turn IN "
                f"({','.join('?' * len(chunk))})",
                (*_key(key), *chunk),
            )
        ]
    return sorted(found, key=lambda r: r.id)


def delete(
    connection: sqlite3.Connection,
    key: Key,
    deleted: Sequence[StoredMessage],
    totals: queries.ConversationTotals,
) -> queries.ConversationTotals:
    """Delete ``deleted`` (rows of the conversation, read in this transaction) and bring the
    totals and turn figures in line with what is left; returns the new totals."""
    if not deleted:
        return totals
    connection.execute(queries._RAISE_ID_FLOOR)
    ids = [r.id for r in deleted]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        connection.execute(
            f"DELETE FROM messages WHERE {_WHERE} AND id IN ({','.join('?' * len(chunk))})",
            (*_key(key), *chunk),
        )
    provider_state.forget_covering(connection, key, ids)
    count = totals.message_count - len(deleted)
    tokens = totals.tokens - sum(r.tokens for r in deleted)
    oldest = totals.oldest_timestamp
    if count == 0:
        oldest = None
    elif oldest is None or min(r.timestamp or 0 for r in deleted) <= oldest:
        oldest = connection.execute(
            f"SELECT MIN(timestamp) FROM messages WHERE {_WHERE}", _key(key)
        ).fetchone()[0]
    last_turn, turn_start = _last_turn(connection, key)
    after = queries.ConversationTotals(
        count, tokens, last_turn, turn_start, oldest, totals.last_activity
    )
    queries.write_totals(connection, key, after, existed=True)
    # The last turn is running again: no figures. A deleted turn below it leaves a gap.
    connection.execute(
        f"DELETE FROM turn_figures WHERE {_WHERE} AND turn >= ?", (*_key(key), last_turn)
    )
    gaps = [
        r.turn for r in deleted if r.turn < last_turn and not _has_turn(connection, key, r.turn)
    ]
    if gaps:
        connection.execute(
            f"DELETE FROM turn_figures WHERE {_WHERE} AND turn <= ?", (*_key(key), max(gaps))
        )
    return after


def _has_turn(connection: sqlite3.Connection, key: Key, turn: int) -> bool:
    return (
        connection.execute(
            f"SELECT 1 FROM messages WHERE {_WHERE} AND turn = ? LIMIT 1", (*_key(key), turn)
        ).fetchone()
        is not None
    )


def _last_turn(connection: sqlite3.Connection, key: Key) -> tuple[int, int]:
    """(the highest turn left, the id of its first row); (0, 0) when no row is left."""
    (last,) = connection.execute(
        f"SELECT MAX(turn) FROM messages WHERE {_WHERE}", _key(key)
    ).fetchone()
    if last is None:
        return 0, 0
    (start,) = connection.execute(
        f"SELECT MIN(id) FROM messages WHERE {_WHERE} AND turn = ?", (*_key(key), last)
    ).fetchone()
    return int(last), int(start)


def turn_rows(connection: sqlite3.Connection, key: Key, turn: int) -> list[StoredMessage]:
    """The rows of one turn, in order."""
    return rows_of_turns(connection, key, [turn])


def update_row(connection: sqlite3.Connection, key: Key, edited: StoredMessage) -> None:
    """Store ``edited``'s content, attachments, metadata, tokens and origin in its row."""
    _, content, _, _, _, attachments, _, _, metadata = message_columns(edited, 0)
    # The fold goes with the text (search_index.py): without it the stale-fold trigger leaves the
    # row indexed by lower(content), and an accent-insensitive search would miss the new text.
    connection.execute(
        f"UPDATE messages SET content = ?, folded = ?, attachments = ?, metadata = ?, tokens = ?, "
        f"origin = ? WHERE id = ? AND {_WHERE}",
        (
            content,
            stored_fold(edited.content),
            attachments,
            metadata,
            edited.tokens,
            origin_column(edited),
            edited.id,
            *_key(key),
        ),
    )


def replace_turn_figures(
    connection: sqlite3.Connection, key: Key, turn: int, own: Sequence[int]
) -> None:
    """An edited turn's own figures become ``own``; every later turn's running sums move by the
    difference. A turn without recorded figures (the running one) is left without."""
    stored = connection.execute(
        f"SELECT {', '.join(FIGURES)} FROM turn_figures WHERE {_WHERE} AND turn = ?",
        (*_key(key), turn),
    ).fetchone()
    if stored is None:
        return
    delta = [new - old for new, old in zip(own, stored, strict=True)]
    if not any(delta):
        return
    connection.execute(
        f"UPDATE turn_figures SET {', '.join(f'{n} = ?' for n in FIGURES)} "
        f"WHERE {_WHERE} AND turn = ?",
        (*own, *_key(key), turn),
    )
    connection.execute(
        f"UPDATE turn_figures SET {', '.join(f'earlier_{n} = earlier_{n} + ?' for n in FIGURES)} "
        f"WHERE {_WHERE} AND turn > ?",
        (*delta, *_key(key), turn),
    )


def copy(
    connection: sqlite3.Connection, source: Key, target: Key, through_id: int, now: int
) -> tuple[queries.ConversationTotals, int]:
    """Copy the source's rows with ids ≤ ``through_id`` into ``target`` (which has no rows), in
    order, with new ids and every other column kept, and the figures of the turns the copy
    completes. Returns the target's totals (active ``now``) and the id before the first copy:
    the copy of the source's n-th row (counting from 1) has id base + n."""
    (base,) = connection.execute(ID_BEFORE_COPY).fetchone()
    connection.execute(COPY_ROWS, (base, *_key(target), *_key(source), through_id))
    count, tokens, oldest = connection.execute(
        f"SELECT COUNT(*), COALESCE(SUM(tokens), 0), MIN(timestamp) FROM messages WHERE {_WHERE}",
        _key(target),
    ).fetchone()
    last_turn, turn_start = _last_turn(connection, target)
    totals = queries.ConversationTotals(count, tokens, last_turn, turn_start, oldest, now)
    connection.execute(
        "INSERT INTO turn_figures SELECT ?, ?, turn, "
        f"{', '.join(FIGURES)}, {', '.join(f'earlier_{n}' for n in FIGURES)} "
        f"FROM turn_figures WHERE {_WHERE} AND turn < ?",
        (*_key(target), *_key(source), last_turn),
    )
    return totals, int(base)


def rows_through(connection: sqlite3.Connection, key: Key, row_id: int) -> int:
    """How many of the conversation's rows have ids ≤ ``row_id``."""
    (count,) = connection.execute(
        f"SELECT COUNT(*) FROM messages WHERE {_WHERE} AND id <= ?", (*_key(key), row_id)
    ).fetchone()
    return int(count)


def last_id(connection: sqlite3.Connection, key: Key) -> int | None:
    """The conversation's newest row id (None: it has no rows)."""
    (found,) = connection.execute(
        f"SELECT MAX(id) FROM messages WHERE {_WHERE}", _key(key)
    ).fetchone()
    return int(found) if found is not None else None


def delete_summary(connection: sqlite3.Connection, key: Key) -> bool:
    """Delete the summary; returns whether there was one."""
    cursor = connection.execute(f"DELETE FROM summaries WHERE {_WHERE}", _key(key))
    return cursor.rowcount > 0
