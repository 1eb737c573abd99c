"""Stateless SQL of conversation trees (protocol.md "Version 5" → Conversation trees), shared by
both engines: every row has a parent (``messages.parent_id``), and the rows of a conversation's
**active path** are its rows as every read of versions 1–4 knows them, under its own key.

**Parking.** The rows of the other branches keep their ids, text and search index entries, and
are *parked*: their ``conversation`` column holds the conversation's id followed by
``rows.PARKED``, a key no client can name (the wire refuses NUL in a conversation id). So every
read, cache, tail, turn figure and total of versions 1–4 stays as it was, and a conversation
without branches reads exactly as before. Switching the active path is an ``UPDATE`` of that
column of the rows switched (``park_after``, ``unpark``): never a delete and insert again, so
ids only grow (the lazy search index relies on it). Rows of a path always have growing ids (a
row is written after its parent; a row that loses its parent takes its nearest ancestor), so
the active path in id order is in path order, and its active leaf is its newest row.

**Inactive branches** (``branches``): each subtree off the active path (a parked row whose
parent is on the active path, or a parked first row, with everything below it), with its rows'
count, its newest row's timestamp and its most recent leaf activity (``messages.active_at``: when
a leaf stopped being the active leaf). Kept in step whenever the parked rows change, so that
siblings, retention's check and its branch rules read a few rows, not the parked history: a
switch by ``update_branches`` from the rows it moved (``policy.tree.after_switch``), a deletion
of parked rows by ``refresh``. ``conversations.branches`` and ``branch_expiry`` (the oldest
newest-row timestamp) are what the retention check reads with the totals;
``conversations.switches`` moves whenever the active path changed other than at its end (the
change watch's reason ``"branch"``). The columns and the table are schema step 15 (store.schema;
PostgreSQL's version 11).

**Reads by branch and by page.** ``messages_by_parent`` (schema step 16, PostgreSQL's 12) finds a
row's children: a switch reads the one inactive branch it moves (``branch_nodes``: the target's
ancestors by primary key, then its head's subtree), ``getTree`` its page's rows and their
children's count (``tree_page``, ``parked_children``), never the conversation's every row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from chat_history.model import Key, StoredMessage
from chat_history.policy.tree import Branch, Node, inactive_branches, subtree
from chat_history.store import queries
from chat_history.store.engine import sqlite3
from chat_history.store.rows import COLUMNS, STREAMING_TEXT, parked_key, to_message

_CHUNK = 500


def parked(key: Key) -> str:
    """The ``conversation`` column of ``key``'s parked rows."""
    return parked_key(key.conversation)


@attrs.frozen
class Moved:
    """The rows ``park_after`` or ``unpark`` took off or onto the active path: how many, their
    tokens, their oldest timestamp and lowest turn (None: none); and (``park_after``) their
    lowest id, newest timestamp and latest leaf activity, what an inactive branch of them says."""

    count: int
    tokens: int
    oldest: int | None
    lowest_turn: int | None
    first: int | None = None
    newest: int | None = None
    activity: int | None = None

    def branch(self, parent: int | None) -> Branch | None:
        """The rows as one inactive branch below ``parent`` (None: no row moved)."""
        if not self.count or self.first is None or self.newest is None:
            return None
        return Branch(self.first, parent, self.count, self.newest, self.activity)


_NODE = "id, parent_id, turn, role, tokens, timestamp, active_at"


def _node(row: Sequence[Any], active: bool) -> Node:
    row_id, parent, turn, role, tokens, timestamp, active_at = row
    return Node(
        int(row_id),
        None if parent is None else int(parent),
        int(turn),
        str(role),
        int(tokens),
        int(timestamp),
        None if active_at is None else int(active_at),
        active,
    )


def parked_nodes(connection: sqlite3.Connection, key: Key) -> list[Node]:
    """Every parked row of the conversation, in id order."""
    return [
        _node(row, False)
        for row in connection.execute(
            f"SELECT {_NODE} FROM messages WHERE workspace = ? AND conversation = ? ORDER BY id",
            (key.workspace, parked(key)),
        )
    ]


#: The ids of parked row ``?``'s parked ancestors, itself included (by primary key, one a step).
_ANCESTORS = """WITH RECURSIVE up(id, parent_id) AS (
    SELECT id, parent_id FROM messages WHERE id = ? AND workspace = ? AND conversation = ?
    UNION ALL
    SELECT m.id, m.parent_id FROM messages m JOIN up ON m.id = up.parent_id
    WHERE m.workspace = ? AND m.conversation = ?
) SELECT MIN(id) FROM up"""

#: Parked row ``?`` and every row below it (``messages_by_parent``, one step a generation;
#: ``CROSS JOIN``: SQLite keeps the queue outside, never a scan of the parked rows a step).
_SUBTREE = f"""WITH RECURSIVE below(id) AS (
    SELECT id FROM messages WHERE id = ? AND workspace = ? AND conversation = ?
    UNION ALL
    SELECT m.id FROM below CROSS JOIN messages m
    WHERE m.parent_id = below.id AND m.workspace = ? AND m.conversation = ?
) SELECT {_NODE} FROM messages WHERE workspace = ? AND conversation = ?
    AND id IN (SELECT id FROM below) ORDER BY id"""


def branch_nodes(connection: sqlite3.Connection, key: Key, row_id: int) -> list[Node]:
    """The inactive branch that holds parked row ``row_id``: its head's subtree, in id order
    (none when the row is not parked). Reads that branch's rows only."""
    where = (key.workspace, parked(key))
    head = connection.execute(_ANCESTORS, (row_id, *where, *where)).fetchone()[0]
    if head is None:
        return []
    return [
        _node(row, False)
        for row in connection.execute(_SUBTREE, (int(head), *where, *where, *where))
    ]


def parked_children(
    connection: sqlite3.Connection, key: Key, after_id: int, last_id: int
) -> dict[int, int]:
    """How many parked rows follow each row with an id after ``after_id`` up to ``last_id``
    (rows with none left out): those rows' children only, by ``messages_by_parent``."""
    return {
        int(parent): int(count)
        for parent, count in connection.execute(
            "SELECT parent_id, COUNT(*) FROM messages WHERE workspace = ? AND conversation = ? "
            "AND parent_id > ? AND parent_id <= ? GROUP BY parent_id",
            (key.workspace, parked(key), after_id, last_id),
        )
    }


def parked_rows(connection: sqlite3.Connection, key: Key, first_id: int) -> list[StoredMessage]:
    """The parked rows of the conversation with ids from ``first_id`` on, in id order."""
    return queries.rows_from(connection, Key(key.workspace, parked(key)), first_id)


def node(connection: sqlite3.Connection, key: Key, row_id: int) -> Node | None:
    """Row ``row_id`` of the conversation, on its active path or not (None: not one of its)."""
    found = connection.execute(
        f"SELECT {_NODE}, conversation FROM messages WHERE id = ? AND workspace = ? "
        "AND conversation IN (?, ?)",
        (row_id, key.workspace, key.conversation, parked(key)),
    ).fetchone()
    if found is None:
        return None
    return _node(found[:-1], found[-1] == key.conversation)


def branches(connection: sqlite3.Connection, key: Key) -> list[Branch]:
    """The conversation's inactive branches, by head id."""
    return [
        Branch(int(h), None if p is None else int(p), int(r), int(n), None if a is None else int(a))
        for h, p, r, n, a in connection.execute(
            "SELECT head, parent, row_count, newest, activity FROM branches "
            "WHERE workspace = ? AND conversation = ? ORDER BY head",
            (key.workspace, key.conversation),
        )
    ]


def _moving(connection: sqlite3.Connection, where: str, params: Sequence[object]) -> Moved:
    count, tokens, oldest, lowest, first, newest, activity = connection.execute(
        "SELECT COUNT(*), COALESCE(SUM(tokens), 0), MIN(timestamp), MIN(turn), MIN(id), "
        f"MAX(timestamp), MAX(active_at) FROM messages WHERE {where}",
        params,
    ).fetchone()
    return Moved(
        int(count),
        int(tokens),
        oldest,
        lowest,
        None if first is None else int(first),
        None if newest is None else int(newest),
        None if activity is None else int(activity),
    )


def park_after(connection: sqlite3.Connection, key: Key, fork: int | None) -> Moved:
    """Park the active path's rows after row ``fork`` (None: all of them); a stamp of its
    leaf comes first (``Moved.activity`` holds it)."""
    where = "workspace = ? AND conversation = ? AND id > ?"
    params = (key.workspace, key.conversation, -1 if fork is None else fork)
    moved = _moving(connection, where, params)
    if moved.count:
        connection.execute(
            f"UPDATE messages SET conversation = ? WHERE {where}", (parked(key), *params)
        )
    return moved


def unpark(connection: sqlite3.Connection, key: Key, ids: Sequence[int]) -> Moved:
    """Put the parked rows ``ids`` (a path's rows below the active path's end) on the active
    path."""
    count = tokens = 0
    oldest: int | None = None
    lowest: int | None = None
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        where = f"workspace = ? AND conversation = ? AND id IN ({','.join('?' * len(chunk))})"
        params = (key.workspace, parked(key), *chunk)
        moved = _moving(connection, where, params)
        connection.execute(
            f"UPDATE messages SET conversation = ? WHERE {where}", (key.conversation, *params)
        )
        count += moved.count
        tokens += moved.tokens
        if moved.oldest is not None:
            oldest = moved.oldest if oldest is None else min(oldest, moved.oldest)
        if moved.lowest_turn is not None:
            lowest = moved.lowest_turn if lowest is None else min(lowest, moved.lowest_turn)
    return Moved(count, tokens, oldest, lowest)


def stamp(connection: sqlite3.Connection, key: Key, leaf: int, at: int) -> None:
    """Row ``leaf`` stopped being the active leaf at ``at``."""
    connection.execute(
        "UPDATE messages SET active_at = ? WHERE id = ? AND workspace = ? "
        "AND conversation IN (?, ?)",
        (at, leaf, key.workspace, key.conversation, parked(key)),
    )


def set_parent(
    connection: sqlite3.Connection, key: Key, ids: Iterable[int], parent: int | None
) -> None:
    """The rows ``ids`` (on the active path or not) follow row ``parent`` now."""
    wanted = sorted(ids)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        connection.execute(
            f"UPDATE messages SET parent_id = ? WHERE workspace = ? AND conversation IN (?, ?) "
            f"AND id IN ({','.join('?' * len(chunk))})",
            (parent, key.workspace, key.conversation, parked(key), *chunk),
        )


def successors(
    connection: sqlite3.Connection, key: Key, gone: Sequence[int]
) -> dict[int, int | None]:
    """After the active path's rows ``gone`` (ids, ascending) were deleted: each row left on it
    that followed one of them, with the row it follows now (the nearest row left before it;
    None: it is a first row now). One lookup per run of deleted rows."""
    moved: dict[int, int | None] = {}
    reached = -1
    for row_id in gone:
        if row_id < reached:
            continue
        after = connection.execute(
            "SELECT MIN(id) FROM messages WHERE workspace = ? AND conversation = ? AND id > ?",
            (key.workspace, key.conversation, row_id),
        ).fetchone()[0]
        if after is None:
            break
        reached = int(after)
        if reached in moved:
            continue
        before = connection.execute(
            "SELECT MAX(id) FROM messages WHERE workspace = ? AND conversation = ? AND id < ?",
            (key.workspace, key.conversation, reached),
        ).fetchone()[0]
        moved[reached] = None if before is None else int(before)
    return moved


def delete_parked(connection: sqlite3.Connection, key: Key, ids: Sequence[int]) -> None:
    """Delete parked rows by id."""
    connection.execute(queries._RAISE_ID_FLOOR)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        connection.execute(
            f"DELETE FROM messages WHERE workspace = ? AND conversation = ? AND id IN "
            f"({','.join('?' * len(chunk))})",
            (key.workspace, parked(key), *chunk),
        )


def after_delete(
    connection: sqlite3.Connection, key: Key, gone: Sequence[int], *, adopt: bool, branched: bool
) -> tuple[dict[int, int | None], bool]:
    """After the active path's rows ``gone`` (ascending) were deleted: each row left on it that
    followed one of them follows the nearest row left before it; the inactive branches that
    started below them follow it too (``adopt``: deleteTurns, a discarded reply) or are deleted
    with them (retention, truncate: an alternative to a turn that is gone is gone). Returns the
    rows of the active path that follow another row now (id -> parent), and whether the
    inactive branches changed (only looked at when the conversation has any: ``branched``)."""
    moved = successors(connection, key, gone)
    for row_id, parent in moved.items():
        set_parent(connection, key, [row_id], parent)
    if not branched:
        return moved, False
    lost = set(gone)
    orphans = [b for b in branches(connection, key) if b.parent in lost]
    if not orphans:
        return moved, False
    if adopt:
        for branch in orphans:
            assert branch.parent is not None
            before = connection.execute(
                "SELECT MAX(id) FROM messages WHERE workspace = ? AND conversation = ? AND id < ?",
                (key.workspace, key.conversation, branch.parent),
            ).fetchone()[0]
            set_parent(connection, key, [branch.head], before)
    else:
        nodes = parked_nodes(connection, key)
        delete_parked(connection, key, sorted({i for b in orphans for i in subtree(nodes, b.head)}))
    refresh(connection, key)
    return moved, True


def refresh(connection: sqlite3.Connection, key: Key) -> list[Branch]:
    """Work the conversation's inactive branches out again from its parked rows, after they
    changed (``write_branches``); returns them."""
    found = inactive_branches(parked_nodes(connection, key))
    write_branches(connection, key, found)
    return found


def update_branches(
    connection: sqlite3.Connection, key: Key, before: Sequence[Branch], after: Sequence[Branch]
) -> None:
    """The conversation's inactive branches were ``before`` and are ``after`` now: only the
    rows that differ are deleted or written (its record says how many, and the oldest of their
    newest rows)."""
    old, new = set(before), set(after)
    gone = sorted(b.head for b in old - new)
    for start in range(0, len(gone), _CHUNK):
        chunk = gone[start : start + _CHUNK]
        connection.execute(
            "DELETE FROM branches WHERE workspace = ? AND conversation = ? "
            f"AND head IN ({','.join('?' * len(chunk))})",
            (key.workspace, key.conversation, *chunk),
        )
    _insert_branches(connection, key, sorted(new - old, key=lambda b: b.head))
    _record_branches(connection, key, after)


def _insert_branches(connection: sqlite3.Connection, key: Key, found: Sequence[Branch]) -> None:
    if found:
        connection.executemany(
            "INSERT INTO branches (workspace, conversation, head, parent, row_count, newest, "
            "activity) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (key.workspace, key.conversation, b.head, b.parent, b.rows, b.newest, b.activity)
                for b in found
            ],
        )


def _record_branches(connection: sqlite3.Connection, key: Key, found: Sequence[Branch]) -> None:
    connection.execute(
        "UPDATE conversations SET branches = ?, branch_expiry = ? "
        "WHERE workspace = ? AND conversation = ?",
        (
            len(found),
            min((b.newest for b in found), default=None),
            key.workspace,
            key.conversation,
        ),
    )


def write_branches(connection: sqlite3.Connection, key: Key, found: Sequence[Branch]) -> None:
    """The conversation's inactive branches are ``found`` now (its record says how many, and
    the oldest of their newest rows)."""
    connection.execute(
        "DELETE FROM branches WHERE workspace = ? AND conversation = ?",
        (key.workspace, key.conversation),
    )
    _insert_branches(connection, key, found)
    _record_branches(connection, key, found)


def switched(connection: sqlite3.Connection, key: Key) -> None:
    """The active path changed other than at its end (the change watch's ``"branch"``)."""
    connection.execute(
        "UPDATE conversations SET switches = switches + 1 WHERE workspace = ? AND conversation = ?",
        (key.workspace, key.conversation),
    )


def tree_rows(connection: sqlite3.Connection, key: Key) -> list[tuple[StoredMessage, bool]]:
    """Every row of the conversation, on every branch, in id order, each with whether it is on
    the active path (an export of the whole tree)."""
    return [
        (to_message(row[:-1]), row[-1] == key.conversation)
        for row in connection.execute(
            f"SELECT {COLUMNS}, conversation FROM messages "
            "WHERE workspace = ? AND conversation IN (?, ?) ORDER BY id",
            (key.workspace, key.conversation, parked(key)),
        )
    ]


def tree_page(
    connection: sqlite3.Connection, key: Key, after_id: int, limit: int
) -> list[tuple[Node, str]]:
    """Up to ``limit`` rows of the whole tree with ids after ``after_id``, in id order, each with
    the start of its text (its first 160 characters: ``getTree``'s preview is cut from it).
    The active path's and the parked rows' next ids first (``messages_by_conversation``, at most
    ``limit`` of each), so that only the page's rows are read whole."""
    ids: list[int] = []
    for conversation in (key.conversation, parked(key)):
        ids.extend(
            int(row[0])
            for row in connection.execute(
                "SELECT id FROM messages WHERE workspace = ? AND conversation = ? AND id > ? "
                "ORDER BY id LIMIT ?",
                (key.workspace, conversation, after_id, limit),
            )
        )
    if not ids:
        return []
    last = sorted(ids)[: max(limit, 1)][-1]
    return [
        (_node(row[:7], row[7] == key.conversation), str(row[8] or ""))
        for row in connection.execute(
            f"SELECT {_NODE}, conversation, substr(CASE WHEN status = 'streaming' THEN "
            f"{STREAMING_TEXT} ELSE content END, 1, 160) FROM messages "
            "WHERE workspace = ? AND conversation IN (?, ?) AND id > ? AND id <= ? ORDER BY id",
            (key.workspace, key.conversation, parked(key), after_id, last),
        )
    ]
