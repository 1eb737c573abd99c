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

What reads the tree (its nodes, branches and pages) is ``store.tree_reads``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from chat_history.model import Key
from chat_history.policy.tree import Branch, inactive_branches, subtree
from chat_history.store import queries
from chat_history.store.engine import sqlite3
from chat_history.store.tree_reads import branches, parked, parked_nodes

_CHUNK = 500


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
