"""Conversation trees against a small reference model (protocol.md "Version 5" → Conversation
trees), on both engines: random appends after any row (the active leaf, a row of the active path,
a row of another branch, none: a new first row), Regenerate through ``beginReply``, switches,
truncates of any row, deleted turns and retention (the count rule on the active path,
``maxInactiveBranches``), from two windows (two connections to one database). After every step
each window reads what the model holds: the active path (ids, parents, turns, siblings) and the
whole tree (parents, children, which rows are active, the active leaf).

The model is written apart from ``policy.tree``: a dict of nodes and the active path as a list,
with each rule of the spec spelled out again (the leaf active most recently at each fork, else the
newest child; the branches below a removed row go; children of deleted turns follow their
parent; the least recently active branches go first)."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from tests.conftest import Databases
from tests.unit.conftest import FixedClock, settings_from

from chat_history.model import Follow, Key, Message
from chat_history.policy.retention import plan_retention
from chat_history.policy.tree import inactive_branches
from chat_history.service import branches, edits, history, replies
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.replies import ReplyBegin, ReplyChange
from chat_history.store import HistoryStore, Store, tree_reads
from chat_history.store.postgres import PostgresStore

KEY = Key("ws", "tree")
MAX_BRANCHES = 3
SETTINGS = settings_from({"maxMessages": 9, "maxInactiveBranches": MAX_BRANCHES, "maxAgeHours": 0})
MINUS = float("-inf")


@attrs.define
class Node:
    id: int
    parent: int | None
    role: str
    turn: int
    tokens: int
    timestamp: int
    #: when it stopped being the active leaf
    active_at: int | None = None


class Tree:
    """The reference model of one conversation."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.path: list[int] = []  # the active path, first row first

    # -- reading ------------------------------------------------------------------------------

    def children(self, parent: int | None) -> list[int]:
        return sorted(n.id for n in self.nodes.values() if n.parent == parent)

    def below(self, top: int) -> list[int]:
        found = [top]
        for node_id in sorted(self.nodes):
            if self.nodes[node_id].parent in found:
                found.append(node_id)
        return found

    def parked(self) -> list[int]:
        return sorted(set(self.nodes) - set(self.path))

    def heads(self) -> list[int]:
        """The inactive branches: parked rows whose parent is active or that are first rows."""
        on = set(self.path)
        return [
            i for i in self.parked() if self.nodes[i].parent is None or self.nodes[i].parent in on
        ]

    def recency(self, top: int) -> float:
        stamps = [self.nodes[i].active_at for i in self.below(top)]
        if self.path and self.path[-1] in self.below(top):
            return float("inf")
        return max((float(s) for s in stamps if s is not None), default=MINUS)

    def descend(self, start: int | None) -> list[int]:
        path: list[int] = []
        options = self.children(start)
        while options:
            start = max(options, key=lambda c: (self.recency(c), c))
            path.append(start)
            options = self.children(start)
        return path

    def ancestors(self, row: int) -> list[int]:
        chain: list[int] = []
        at: int | None = row
        while at is not None:
            chain.append(at)
            at = self.nodes[at].parent
        return chain[::-1]

    # -- changing -----------------------------------------------------------------------------

    def activate(self, path: list[int], now: int) -> None:
        """``path`` becomes the active path; the old leaf, when it leaves it, is stamped."""
        leaving = [i for i in self.path if i not in path]
        if leaving:
            stamps = [self.nodes[i].active_at for i in self.parked()]
            latest = max((s for s in stamps if s is not None), default=None)
            self.nodes[self.path[-1]].active_at = (
                now if latest is None or latest < now else latest + 1
            )
        self.path = list(path)

    def delete(self, ids: set[int]) -> None:
        for node_id in ids:
            del self.nodes[node_id]
        self.path = [i for i in self.path if i not in ids]

    def relink(self) -> None:
        """Each active row follows the one before it (after deletions)."""
        for before, node_id in zip([None, *self.path], self.path, strict=False):
            self.nodes[node_id].parent = before

    def settle(self, parent: int | None, now: int) -> None:
        """The path switchBranch would pick from ``parent`` (the active leaf) comes on."""
        if (self.path[-1] if self.path else None) != parent:
            return
        below = self.descend(parent)
        if below:
            self.activate([*self.path, *below], now)

    def delete_active(self, ids: set[int], *, adopt: bool) -> None:
        """Rows of the active path go: the branches below them are adopted by the nearest row
        left before, or go with them."""
        for head in self.heads():
            parent = self.nodes[head].parent
            if parent in ids:
                if adopt:
                    kept = [i for i in self.path if i < parent and i not in ids]
                    self.nodes[head].parent = kept[-1] if kept else None
                else:
                    self.delete(set(self.below(head)))
        self.delete(ids)
        self.relink()

    def retain(self, now: int) -> None:
        rows = [self.nodes[i] for i in self.path]
        plan = plan_retention(rows, SETTINGS, now)
        if plan.delete_ids:
            self.delete_active(set(plan.delete_ids), adopt=False)
        heads = self.heads()
        dropped = False
        if len(heads) > MAX_BRANCHES:

            def last_active(head: int) -> tuple[int, int]:
                stamps = [self.nodes[i].active_at for i in self.below(head)]
                newest = max(self.nodes[i].timestamp for i in self.below(head))
                activity = max((s for s in stamps if s is not None), default=None)
                return (newest if activity is None else activity, head)

            for head in sorted(heads, key=last_active)[: len(heads) - MAX_BRANCHES]:
                self.delete(set(self.below(head)))
            dropped = True
        if (plan.delete_ids or dropped) and not self.path:
            self.settle(None, now)


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


class TreeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FixedClock()
        self.folder: Path | None = None
        self.stores: list[HistoryStore]
        if SHARED[0] is None:  # SQLite: a fresh file per run, two connections to it
            self.folder = Path(tempfile.mkdtemp(prefix="chat-history-trees-"))
            self.stores = [Store(self.folder), Store(self.folder)]
        else:  # PostgreSQL: the test's database, emptied by each run's teardown
            self.stores = list(SHARED)  # type: ignore[arg-type]
        self.windows = [ChatHistoryManager(s, SETTINGS, clock=self.clock) for s in self.stores]
        self.tree = Tree()
        self.serial = itertools.count(1)

    def teardown(self) -> None:
        if self.folder is None:
            history.clear(self.windows[0], KEY)
            return
        for store in self.stores:
            store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def follow(self, data: st.DataObject) -> Follow | None:
        tree = self.tree
        choice = data.draw(st.sampled_from(["leaf", "active", "parked", "none"]))
        if choice == "active" and tree.path:
            return Follow(data.draw(st.sampled_from(tree.path)))
        if choice == "parked" and tree.parked():
            return Follow(data.draw(st.sampled_from(tree.parked())))
        if choice == "none":
            return Follow(None)
        return None

    def follow_model(self, follow: Follow | None, now: int) -> None:
        tree = self.tree
        if follow is None:
            return
        parent = follow.parent_id
        if parent is None:
            tree.activate([], now)
        elif parent in tree.path:
            tree.activate(tree.path[: tree.path.index(parent) + 1], now)
        else:
            tree.activate(tree.ancestors(parent), now)

    def added(self, rows: list[tuple[int, str, int, int, int]]) -> None:
        """New rows (id, role, turn, tokens, timestamp), in order, after the active leaf."""
        tree = self.tree
        for row_id, role, turn, tokens, timestamp in rows:
            last_turn = tree.nodes[tree.path[-1]].turn if tree.path else 0
            assert turn == last_turn + (role == "user"), (row_id, turn, last_turn)
            parent = tree.path[-1] if tree.path else None
            tree.nodes[row_id] = Node(row_id, parent, role, turn, tokens, timestamp)
            tree.path.append(row_id)

    @rule(data=st.data(), roles=st.lists(st.sampled_from("ua"), min_size=1, max_size=3))
    def append(self, data: st.DataObject, roles: list[str]) -> None:
        self.clock.now += 1
        window = data.draw(st.sampled_from(self.windows))
        follow = self.follow(data)
        messages = [U(f"q{next(self.serial)}") if r == "u" else A("a") for r in roles]
        stored = history.append(window, KEY, messages, follow).messages
        self.follow_model(follow, self.clock.now)
        self.added([(r.id, r.role, r.turn, r.tokens, r.timestamp or 0) for r in stored])
        self.tree.retain(self.clock.now)

    @rule(data=st.data())
    def regenerate(self, data: st.DataObject) -> None:
        self.clock.now += 1
        window = data.draw(st.sampled_from(self.windows))
        follow = self.follow(data)
        row = replies.begin(window, KEY, ReplyBegin(follow=follow))
        ended = replies.end(window, KEY, row.id, "complete", ReplyChange(content="again"))
        assert ended.message is not None
        self.follow_model(follow, self.clock.now)
        message = ended.message
        self.added([(message.id, "assistant", message.turn, message.tokens, row.timestamp or 0)])
        self.tree.retain(self.clock.now)

    def window_and_row(self, data: st.DataObject) -> tuple[ChatHistoryManager, int]:
        """A moment later, a window and any stored row of the tree."""
        self.clock.now += 1
        window = data.draw(st.sampled_from(self.windows))
        return window, data.draw(st.sampled_from(sorted(self.tree.nodes)))

    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        tree = self.tree
        if not tree.nodes:
            return
        window, target = self.window_and_row(data)
        result = branches.switch(window, KEY, target)
        if target not in tree.path:
            tree.activate(tree.ancestors(target) + tree.descend(target), self.clock.now)
        assert result.active_leaf_id == tree.path[-1]
        assert [r.id for r in result.messages] == tree.path

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        tree = self.tree
        if not tree.nodes:
            return
        window, target = self.window_and_row(data)
        result = edits.truncate(window, KEY, target)
        if target in tree.path:
            gone = set(tree.path[tree.path.index(target) :])
            before = len(tree.nodes)
            parent = tree.nodes[target].parent
            tree.delete_active(gone, adopt=False)
            assert result.deleted_messages == before - len(tree.nodes)
            tree.settle(parent, self.clock.now)
        else:
            doomed = set(tree.below(target))
            tree.delete(doomed)
            assert result.deleted_messages == len(doomed)

    @rule(data=st.data())
    def delete_turns(self, data: st.DataObject) -> None:
        tree = self.tree
        turns = sorted({tree.nodes[i].turn for i in tree.path})
        if not turns:
            return
        self.clock.now += 1
        window = data.draw(st.sampled_from(self.windows))
        named = data.draw(st.lists(st.sampled_from(turns), min_size=1, max_size=2))
        result = edits.delete_turns(window, KEY, named)
        gone = {i for i in tree.path if tree.nodes[i].turn in named}
        assert result.deleted_messages == len(gone)
        tree.delete_active(gone, adopt=True)
        if not tree.path:
            tree.settle(None, self.clock.now)

    @invariant()
    def every_window_reads_the_model(self) -> None:
        tree = self.tree
        tree.retain(self.clock.now)  # a read runs retention first
        for window in self.windows:
            rows = history.get(window, KEY).messages
            assert [r.id for r in rows] == tree.path
            assert [r.parent_id for r in rows] == [tree.nodes[i].parent for i in tree.path]
            assert [r.turn for r in rows] == [tree.nodes[i].turn for i in tree.path]
            for row in rows:
                others = tree.children(tree.nodes[row.id].parent)
                if len(others) == 1:
                    assert row.siblings is None
                else:
                    assert row.siblings is not None
                    assert (row.siblings.ids, row.siblings.index) == (
                        tuple(others),
                        others.index(row.id),
                    )
            page = branches.tree(window, KEY)
            assert page.active_leaf_id == (tree.path[-1] if tree.path else None)
            assert [(n.id, n.parent_id, n.active, n.children) for n in page.nodes] == [
                (i, tree.nodes[i].parent, i in tree.path, len(tree.children(i)))
                for i in sorted(tree.nodes)
            ]
            # Small pages, one after the other, read what the whole page reads.
            paged: list[branches.TreeNode] = []
            after: int | None = None
            while True:
                part = branches.tree(window, KEY, after, 3)
                paged.extend(part.nodes)
                if not part.has_more:
                    break
                after = part.nodes[-1].id
            assert paged == list(page.nodes)
        # The inactive branches a switch works out from the rows it moves are those every
        # parked row makes.
        with self.windows[0].store.read() as reading:
            connection = reading.connection
            assert tree_reads.branches(connection, KEY) == inactive_branches(
                tree_reads.parked_nodes(connection, KEY)
            )


#: The stores every run shares on PostgreSQL, two connections (empty: each run opens a SQLite
#: file of its own).
SHARED: list[HistoryStore | None] = [None]


@pytest.mark.engines
def test_trees_against_the_model(databases: Databases | None, tmp_path: Path) -> None:
    if databases is not None:
        url = databases.url(tmp_path)
        SHARED[:] = [PostgresStore(url), PostgresStore(url)]
    try:
        run_state_machine_as_test(
            TreeMachine,
            settings=settings(
                max_examples=60,
                stateful_step_count=25,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        for store in SHARED:
            if store is not None:
                store.close()
        SHARED[:] = [None]
