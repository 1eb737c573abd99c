"""Stateless SQL that reads conversation trees (protocol.md "Version 5" → Conversation trees),
shared by both engines, beside ``store.tree``'s writes: a row as a node (``policy.tree.Node``),
the parked rows, the inactive branches' rows, the whole tree and its pages.

**By branch and by page.** ``messages_by_parent`` (schema step 16, PostgreSQL's 12) finds a
row's children: a switch reads the one inactive branch it moves (``branch_nodes``: the target's
ancestors by primary key, then its head's subtree), ``getTree`` its page's rows and their
children's count (``tree_page``, ``parked_children``), never the conversation's every row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Key, StoredMessage
from chat_history.policy.tree import Branch, Node
from chat_history.store import queries
from chat_history.store.engine import sqlite3
from chat_history.store.rows import COLUMNS, STREAMING_TEXT, parked_key, to_message


def parked(key: Key) -> str:
    """The ``conversation`` column of ``key``'s parked rows."""
    return parked_key(key.conversation)


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
