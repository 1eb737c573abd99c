"""The steps of conversation trees on one write transaction (protocol.md "Version 5" →
Conversation trees), shared by the operations that move the active path: a new branch where
``append`` or ``beginReply`` names a parent (``follow_in``), a switch (``activate_in``), the
path taken when the active path lost its end (``settle_in``), and the turn figures of rows that
came onto it (``record_completed_turns``); the siblings a read of the active path shows
(``with_siblings``). The rules are ``policy.tree``'s; the rows move in ``store.tree``."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from chat_history.errors import InvalidParams, ReplyInProgress
from chat_history.model import Follow, Key, StoredMessage
from chat_history.policy.prepare.collapse import turn_figures
from chat_history.policy.tree import Node, Switch, descend
from chat_history.store import ConversationTotals, Reading, Transaction
from chat_history.store.reply_section import ReplyReading
from chat_history.store.tree_section import TreeReading, TreeWriting


def record_completed_turns(tx: Transaction, key: Key, rows: Sequence[StoredMessage]) -> None:
    """The figures of every turn in ``rows`` (a run of the active path's rows from a turn's
    first row) that a later turn follows: what ``prepare`` counts for a turn it does not read."""
    if not rows or rows[0].turn == rows[-1].turn:
        return
    completed: list[tuple[int, tuple[int, ...]]] = []
    start = 0
    for index in range(1, len(rows)):
        if rows[index].turn != rows[start].turn:
            figures = turn_figures(rows[start:index])
            if figures.turns:
                completed.append((rows[start].turn, figures.as_tuple()))
            start = index
    tx.add_turn_figures(key, completed)


def stamp_after(tx: Reading, key: Key, now: int) -> int:
    """When the active leaf stops being active: now, or just after the latest leaf activity
    recorded (several switches within a millisecond keep their order)."""
    found = TreeReading(tx).branches(key)
    latest = max((b.activity for b in found if b.activity is not None), default=None)
    return now if latest is None or latest < now else latest + 1


def activate_in(
    tx: Transaction,
    key: Key,
    switch: Switch,
    now: int,
    *,
    quiet: bool = False,
    branch: Sequence[Node] | None = None,
) -> ConversationTotals | None:
    """Make ``switch``'s path the active path (never while a reply streams on the rows it
    parks: ReplyInProgress); the turn figures of the rows that came follow. ``quiet``: for the
    length of one transaction only (fork's copy of another path), so no leaf is stamped and no
    window told. ``branch``: the inactive branch its arriving rows come from, when the caller
    read it (``branch_switch``). Returns the new totals."""
    streaming = ReplyReading(tx).streaming(key)
    if streaming is not None and (switch.fork is None or streaming.id > switch.fork):
        raise ReplyInProgress(streaming.id)
    section = TreeWriting(tx)
    stamp = None if quiet else stamp_after(tx, key, now)
    totals, lowest = section.activate(key, switch, stamp=stamp, switched=not quiet, branch=branch)
    if lowest is not None:
        first = section.first_of_turn(key, lowest)
        if first is not None:
            record_completed_turns(tx, key, tx.rows_from(key, first))
    return totals


def branch_switch(
    section: TreeReading, key: Key, row_id: int, *, down: bool = False
) -> tuple[Switch, list[Node]]:
    """``parked_switch`` to parked row ``row_id``'s path, from the inactive branch that holds it
    (read whole, and returned: the rows of no other branch are read)."""
    nodes = section.branch_nodes(key, row_id)
    return parked_switch(nodes, row_id, down=down), nodes


def parked_switch(parked: Sequence[Node], row_id: int, *, down: bool = False) -> Switch:
    """The switch to parked row ``row_id``'s path: its parked ancestors up to the active path
    (their fork), the row, and (``down``) the rows ``switchBranch`` follows below it."""
    by_id = {node.id: node for node in parked}
    chain: list[int] = []
    at: int | None = row_id
    while at is not None and at in by_id:
        chain.append(at)
        at = by_id[at].parent_id
    below = descend(parked, row_id, None) if down else []
    return Switch(at, tuple(chain[::-1] + below))


def follow_in(
    tx: Transaction, key: Key, follow: Follow | None, now: int, *, quiet: bool = False
) -> ConversationTotals | None:
    """Make the row ``follow`` names the active leaf, so that new rows follow it (None: they
    follow the active leaf as they are): a row on the active path parks what comes after it, a
    row off it brings its path on, a new first row parks the whole path. ``quiet``: as
    ``activate_in``'s (an import's steps, which settle the active path at their end). Returns
    the totals. Raises InvalidParams ``parent_id`` (not a row of this conversation),
    ReplyInProgress."""
    totals = tx.totals(key)
    if follow is None:
        return totals
    parent = follow.parent_id
    leaf = tx.last_id(key)
    if parent == leaf:
        return totals
    if parent is None:
        return activate_in(tx, key, Switch(None, ()), now, quiet=quiet)
    section = TreeReading(tx)
    node = section.node(key, parent)
    if node is None:
        raise InvalidParams("parent_id", "is not a message of this conversation")
    if node.active:
        return activate_in(tx, key, Switch(parent, ()), now, quiet=quiet)
    switch, nodes = branch_switch(section, key, parent)
    return activate_in(tx, key, switch, now, quiet=quiet, branch=nodes)


def settle_in(tx: Transaction, key: Key, parent: int | None, now: int) -> ConversationTotals | None:
    """After the active path lost its rows below ``parent`` (its leaf now; None: every row):
    the path ``switchBranch`` would pick from ``parent`` among the inactive branches below it
    comes on, when there is one. Returns the totals."""
    totals = tx.totals(key)
    if totals is None or not totals.branches or tx.last_id(key) != parent:
        return totals
    below = descend(TreeReading(tx).parked_nodes(key), parent, None)
    if not below:
        return totals
    return activate_in(tx, key, Switch(parent, tuple(below)), now)


def settle_empty(tx: Transaction, key: Key, now: int) -> None:
    """When a deletion emptied the active path while inactive branches remain, the one
    ``switchBranch`` would pick from above the first rows comes on."""
    totals = tx.totals(key)
    if totals is not None and totals.message_count == 0 and totals.branches:
        settle_in(tx, key, None, now)


def with_siblings(
    tx: Reading, key: Key, rows: Sequence[StoredMessage]
) -> tuple[StoredMessage, ...]:
    """``rows`` (of the active path) with the siblings of those that have any."""
    found = TreeReading(tx).siblings(key, rows)
    if not found:
        return tuple(rows)
    return tuple(
        attrs.evolve(row, siblings=found[row.id]) if row.id in found else row for row in rows
    )
