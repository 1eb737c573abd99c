"""Conversation trees on one section (``TreeReading(reading)``, ``TreeWriting(tx)``): what the
service's tree operations read and change, over the stateless SQL of ``store.tree_reads`` and
``store.tree``, keeping the transaction's memory of the conversation (cache, tail, touched,
removed text) in step through ``Transaction.rows_changed``, as ``reply_section`` does for
replies."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from chat_history.model import Key, Siblings, StoredMessage
from chat_history.policy.tree import Branch, Node, Switch, after_switch, subtree
from chat_history.policy.tree import siblings as siblings_of
from chat_history.store import edits, queries, tree, tree_reads
from chat_history.store.queries import ConversationTotals
from chat_history.store.transaction import Reading, Transaction


class TreeReading:
    """The tree a read section sees."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading
        self._connection = reading.connection

    def node(self, key: Key, row_id: int) -> Node | None:
        """Row ``row_id`` of the conversation, on its active path or not (None: not one of its)."""
        return tree_reads.node(self._connection, key, row_id)

    def parked_nodes(self, key: Key) -> list[Node]:
        """The rows off the active path as nodes, in id order."""
        return tree_reads.parked_nodes(self._connection, key)

    def branch_nodes(self, key: Key, row_id: int) -> list[Node]:
        """The inactive branch holding parked row ``row_id``: its rows as nodes, in id order
        (none when the row is not parked). Reads that branch only."""
        return tree_reads.branch_nodes(self._connection, key, row_id)

    def parked_children(self, key: Key, after_id: int, last_id: int) -> dict[int, int]:
        """How many parked rows follow each row with an id in (``after_id``, ``last_id``]
        (rows with none left out)."""
        return tree_reads.parked_children(self._connection, key, after_id, last_id)

    def parked_rows(self, key: Key, ids: Iterable[int] | None = None) -> list[StoredMessage]:
        """The rows off the active path (those of ``ids`` only, when given), in id order."""
        wanted = None if ids is None else set(ids)
        if wanted is not None and not wanted:
            return []
        rows = tree_reads.parked_rows(self._connection, key, 0 if wanted is None else min(wanted))
        return rows if wanted is None else [row for row in rows if row.id in wanted]

    def branches(self, key: Key) -> list[Branch]:
        """The conversation's inactive branches (none read when its totals say it has none)."""
        totals = self._reading.totals(key)
        if totals is None or not totals.branches:
            return []
        return tree_reads.branches(self._connection, key)

    def siblings(self, key: Key, rows: Iterable[StoredMessage]) -> dict[int, Siblings]:
        """The siblings of those of ``rows`` (rows of the active path) that have any."""
        found = self.branches(key)
        if not found:
            return {}
        return siblings_of(((row.id, row.parent_id) for row in rows), found)

    def first_of_turn(self, key: Key, turn: int) -> int | None:
        """The id of the active path's first row of ``turn`` (None: it has none)."""
        return edits.first_of_turn(self._connection, key, turn)

    def rows(self, key: Key) -> list[tuple[StoredMessage, bool]]:
        """Every row of the whole tree in id order, each with whether it is on the active path."""
        return tree_reads.tree_rows(self._connection, key)

    def page(self, key: Key, after_id: int, limit: int) -> list[tuple[Node, str]]:
        """Up to ``limit`` rows of the whole tree after ``after_id``, with their text's start."""
        return tree_reads.tree_page(self._connection, key, after_id, limit)


class TreeWriting(TreeReading):
    """The tree a write section changes."""

    def __init__(self, tx: Transaction) -> None:
        super().__init__(tx)
        self._tx = tx

    def activate(
        self,
        key: Key,
        switch: Switch,
        *,
        stamp: int | None,
        switched: bool = True,
        branch: Sequence[Node] | None = None,
    ) -> tuple[ConversationTotals | None, int | None]:
        """Make ``switch``'s path the active path: the active path's rows after its fork are
        parked (its leaf, when it goes, stamped ``stamp``: when it stopped being active), its
        arriving rows come onto it; the totals follow, and the turn figures from the lowest
        turn that changed on (returned: the caller records them again). ``switched`` marks the
        change for the change watch (``"branch"``). The inactive branches follow from the rows
        that moved (``policy.tree.after_switch``): ``branch``, the inactive branch the arriving
        rows come from, when the caller read it (``branch_nodes``), else it is read here."""
        tx, connection = self._tx, self._connection
        totals = tx.totals(key)
        before = self.branches(key)
        moved: Sequence[Node] = ()
        if switch.arriving:
            moved = branch if branch is not None else self.branch_nodes(key, switch.arriving[0])
        leaf = edits.last_id(connection, key)
        if leaf is not None and stamp is not None and (switch.fork is None or leaf > switch.fork):
            tree.stamp(connection, key, leaf, stamp)  # it leaves the active path
        left = tree.park_after(connection, key, switch.fork)
        arrived = tree.unpark(connection, key, switch.arriving)
        tx.rows_changed(key)  # the remembered rows and totals go
        if totals is None:
            return None, None
        count = totals.message_count - left.count + arrived.count
        oldest = totals.oldest_timestamp
        if left.count and (oldest is None or (left.oldest is not None and left.oldest <= oldest)):
            oldest = edits.oldest_timestamp(connection, key)
        elif arrived.oldest is not None:
            oldest = arrived.oldest if oldest is None else min(oldest, arrived.oldest)
        last_turn, turn_start = edits.last_turn_start(connection, key)
        after = attrs.evolve(
            totals,
            message_count=count,
            tokens=totals.tokens - left.tokens + arrived.tokens,
            last_turn=last_turn,
            turn_start_id=turn_start,
            oldest_timestamp=oldest if count else None,
        )
        queries.write_totals(connection, key, after, existed=True)
        lowest = min(t for t in (left.lowest_turn, arrived.lowest_turn, last_turn) if t is not None)
        edits.drop_figures_from(connection, key, lowest)
        if switch.arriving and (not moved or moved[0].id != switch.arriving[0]):
            tree.refresh(connection, key)  # not a branch's path from its head: work all out
        else:
            found = after_switch(before, switch, moved, left.branch(switch.fork))
            tree.update_branches(connection, key, before, found)
        if switched:
            tree.switched(connection, key)
        return queries.totals(connection, key), lowest

    def mark_switched(self, key: Key) -> None:
        """The active path changed other than at its end (the change watch's ``"branch"``)."""
        tree.switched(self._connection, key)

    def delete_subtrees(self, key: Key, tops: Sequence[int]) -> int:
        """Delete the rows off the active path ``tops`` and every row below each, for good;
        returns how many."""
        if not tops:
            return 0
        nodes = tree_reads.parked_nodes(self._connection, key)
        doomed = sorted({i for top in tops for i in subtree(nodes, top)})
        tree.delete_parked(self._connection, key, doomed)
        tree.refresh(self._connection, key)
        self._tx.removed_text = True
        self._tx.rows_changed(key)
        return len(doomed)
