"""The branches family (``wire/methods/branches``; protocol.md "Version 5" → Conversation trees):
``switchBranch`` (another path becomes the active path, one write transaction) and ``getTree``
(the whole tree, a page of it in id order, one snapshot); ``path_through`` reads another
branch's path without making it the active one (MCP ``read_conversation``). The rules are
``policy.tree``'s, the steps on a transaction ``tree_steps``'."""

from __future__ import annotations

import attrs

from chat_history.errors import InvalidParams, ReplyInProgress
from chat_history.model import Expected, Key, StoredMessage, Summary
from chat_history.service.edits import check_expected
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.tree_steps import activate_in, branch_switch, with_siblings
from chat_history.store import Reading, Transaction
from chat_history.store.reply_section import ReplyReading
from chat_history.store.tree_section import TreeReading

#: ``getTree``'s page: 1–10,000 rows, 1,000 when the request names none.
MAX_TREE_PAGE = 10_000
DEFAULT_TREE_PAGE = 1_000
#: A node's preview: the first code points of its text.
PREVIEW_CHARS = 80


@attrs.frozen
class SwitchResult:
    """``switchBranch``: the active leaf now, and the active path's newest rows (all of them
    without a ``limit``), and whether older ones exist."""

    active_leaf_id: int | None
    messages: tuple[StoredMessage, ...]
    has_more: bool


@attrs.frozen
class TreeNode:
    """One row of ``getTree``: where it stands in the tree and the start of its text."""

    id: int
    parent_id: int | None
    role: str
    preview: str
    timestamp: int
    #: how many rows follow it
    children: int
    #: on the active path
    active: bool


@attrs.frozen
class TreePage:
    """``getTree``: a page of the tree's rows in id order, the active leaf, and whether rows
    with higher ids exist."""

    nodes: tuple[TreeNode, ...]
    active_leaf_id: int | None
    has_more: bool


@attrs.frozen
class WholeTree:
    """Every row of a conversation on every branch, in id order (each with its ``parent_id``),
    its active leaf and its summary: what ``export --tree`` writes."""

    rows: tuple[StoredMessage, ...]
    active_leaf_id: int | None
    summary: Summary | None


def whole_tree(manager: ChatHistoryManager, key: Key) -> WholeTree:
    """The conversation's rows on every branch after retention (one snapshot), its active
    leaf and its summary. Raises StorageError."""
    with manager.lock:
        return manager.retained_read(
            key,
            lambda tx, _: WholeTree(
                tuple(row for row, _ in TreeReading(tx).rows(key)), tx.last_id(key), tx.summary(key)
            ),
        )


def switch(
    manager: ChatHistoryManager,
    key: Key,
    row_id: int,
    *,
    expected: Expected = None,
    limit: int | None = None,
) -> SwitchResult:
    """Make the path through row ``row_id`` the active path: from it, at each row with several
    children, the child whose subtree holds the leaf active most recently, else the newest
    child, down to a leaf. A row of the active path leaves it as it is (its subtree holds the
    active leaf). Returns the active path's newest ``limit`` rows (all when None).
    Raises InvalidParams ``id`` (no row of this conversation), ReplyInProgress (a reply
    streams in it), ConversationChanged (``expected``), StorageError."""
    with manager.lock:
        now = manager.clock()

        def switch_in(tx: Transaction) -> SwitchResult:
            check_expected(tx, key, expected)
            section = TreeReading(tx)
            node = section.node(key, row_id)
            if node is None:
                raise InvalidParams("id", "is not a message of this conversation")
            streaming = ReplyReading(tx).streaming(key)
            if streaming is not None:
                raise ReplyInProgress(streaming.id)
            if not node.active:
                switch, nodes = branch_switch(section, key, row_id, down=True)
                activate_in(tx, key, switch, now, branch=nodes)
                tx.touch(key, now)
            return _path_page(tx, key, limit)

        return manager.write((key,), switch_in)


@attrs.frozen
class PathRead:
    """The path through a row: its rows in path order, and whether it is the active path."""

    messages: tuple[StoredMessage, ...]
    on_active_path: bool


def path_through(manager: ChatHistoryManager, key: Key, row_id: int) -> PathRead:
    """The path through row ``row_id``, read without changing anything: the active path when the
    row is on it; else from a first row down to it, then the rows ``switchBranch`` would follow
    below it (its newest-active or newest child at each fork) to a leaf. Retention runs first, as
    for every read. Raises InvalidParams ``id`` (no row of this conversation), StorageError."""
    with manager.lock:
        return manager.retained_read(key, lambda tx, _: _path_through_in(tx, key, row_id))


def tree_rows(manager: ChatHistoryManager, key: Key) -> tuple[StoredMessage, ...]:
    """Every row of the conversation, on every branch, in id order (after retention, as every
    read). Raises StorageError."""
    with manager.lock:
        return manager.retained_read(key, lambda tx, _: _tree_rows_in(tx, key))


def _tree_rows_in(tx: Reading, key: Key) -> tuple[StoredMessage, ...]:
    active = tx.all_rows(key)
    totals = tx.totals(key)
    if totals is None or not totals.branches:
        return tuple(active)
    return tuple(sorted([*active, *TreeReading(tx).parked_rows(key)], key=lambda row: row.id))


def _path_through_in(tx: Reading, key: Key, row_id: int) -> PathRead:
    section = TreeReading(tx)
    node = section.node(key, row_id)
    if node is None:
        raise InvalidParams("id", "is not a message of this conversation")
    active = tx.all_rows(key)
    if node.active:
        return PathRead(tuple(active), True)
    switch, _ = branch_switch(section, key, row_id, down=True)
    fork = switch.fork
    shared = [] if fork is None else [row for row in active if row.id <= fork]
    return PathRead(tuple(shared + section.parked_rows(key, switch.arriving)), False)


def _path_page(tx: Reading, key: Key, limit: int | None) -> SwitchResult:
    if limit is None:
        rows, has_more = tx.all_rows(key), False
    else:
        rows, has_more = tx.page(key, limit, None)
    return SwitchResult(tx.last_id(key), with_siblings(tx, key, rows), has_more)


def tree(
    manager: ChatHistoryManager, key: Key, after_id: int | None = None, limit: int | None = None
) -> TreePage:
    """The conversation's rows on every branch after ``after_id`` (from the first when None),
    in id order, at most ``limit`` (``DEFAULT_TREE_PAGE`` when None) of them: each with its
    parent, role, preview, timestamp, number of children and whether it is on the active path.
    Retention runs first, as for every read. Raises StorageError."""
    size = DEFAULT_TREE_PAGE if limit is None else limit
    with manager.lock:
        return manager.retained_read(key, lambda tx, _: _tree_in(tx, key, after_id or 0, size))


def _tree_in(tx: Reading, key: Key, after_id: int, limit: int) -> TreePage:
    section = TreeReading(tx)
    page = section.page(key, after_id, limit + 1)
    has_more = len(page) > limit
    page = page[:limit]
    leaf = tx.last_id(key)
    parked = section.parked_children(key, after_id, page[-1][0].id) if page else {}
    return TreePage(
        tuple(
            TreeNode(
                id=node.id,
                parent_id=node.parent_id,
                role=node.role,
                preview=text[:PREVIEW_CHARS],
                timestamp=node.timestamp,
                # a row of the active path: its next row there (none for the leaf), and the
                # inactive branches that start below it; a parked row: its parked children
                children=(node.active and node.id != leaf) + parked.get(node.id, 0),
                active=node.active,
            )
            for node, text in page
        ),
        leaf,
        has_more,
    )
