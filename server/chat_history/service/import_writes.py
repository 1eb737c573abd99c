"""The writes of an import (``service.imports`` for other tools' sessions, the CLI's ``import``
for an export): a conversation's messages restored in one write transaction, those it already
holds skipped (``policy.imports``), with the summary when newer than the stored one. A line of
messages continues the active path (``import_conversation``); a tree (``ImportTree``: an export
with ``--tree``, a Claude Code session with rewinds) keeps its branches, each new row after its
parent's row, and its active leaf (``import_tree``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from chat_history.model import Follow, Key, Message, StoredMessage, Summary
from chat_history.policy.imports import covered_id, match_stored, match_tree, tree_covered_id
from chat_history.service.manager import ChatHistoryManager, record_in
from chat_history.service.tree_steps import activate_in, branch_switch, follow_in
from chat_history.store import ConversationTotals, Transaction
from chat_history.store.tree_section import TreeWriting


@attrs.frozen
class ImportedSummary:
    """A summary from an export; it covered the first ``covers_messages`` exported messages."""

    summary: str
    updated_at: int
    covers_messages: int | None


@attrs.frozen
class ImportTree:
    """Messages that form a tree: ``parents[i]`` the index of message i's parent (always lower;
    None: a first row), ``active`` the index of the active leaf (None: the last message)."""

    messages: tuple[Message, ...]
    parents: tuple[int | None, ...]
    active: int | None = None

    def __attrs_post_init__(self) -> None:
        if len(self.parents) != len(self.messages):
            raise ValueError("one parent per message")
        if any(p is not None and not 0 <= p < i for i, p in enumerate(self.parents)):
            raise ValueError("a parent comes before its child")

    @property
    def is_line(self) -> bool:
        """Each message follows the one before it and the last is the active leaf: a line, as
        ``import_conversation`` reads it."""
        line = all(p == i - 1 for i, p in enumerate(self.parents, start=0) if i) and (
            not self.parents or self.parents[0] is None
        )
        return line and self.active in (None, len(self.messages) - 1)


@attrs.frozen
class ImportResult:
    """``import_conversation``: the rows inserted, how many were skipped, whether the summary
    was saved."""

    imported: tuple[StoredMessage, ...]
    #: leading messages the conversation already held (policy.imports)
    skipped: int
    summary_saved: bool


def import_conversation(
    manager: ChatHistoryManager,
    key: Key,
    messages: Sequence[Message],
    summary: ImportedSummary | None = None,
) -> ImportResult:
    """Restore exported messages in one write transaction. Messages the conversation already
    holds are skipped (policy.imports); the rest go through the recording rules of ``append``
    but are not cut again (they were when first recorded). Retention is left to the next
    read or write, which applies the settings of whoever uses the conversation.

    Returns the rows inserted, the leading messages skipped and whether ``summary`` was
    saved (only when newer than the stored one). Raises InvalidParams naming the row among
    ``messages``, StorageError."""
    with manager.lock:
        return _import_in(manager, key, messages, summary)


def _import_in(
    manager: ChatHistoryManager,
    key: Key,
    messages: Sequence[Message],
    summary: ImportedSummary | None,
) -> ImportResult:
    """``import_conversation`` in one write transaction (a replaced summary is purged at
    its commit)."""
    return manager.write((key,), lambda tx: _import_with(manager, tx, key, messages, summary))


def _import_with(
    manager: ChatHistoryManager,
    tx: Transaction,
    key: Key,
    messages: Sequence[Message],
    summary: ImportedSummary | None,
) -> ImportResult:
    totals = tx.totals(key)
    match = match_stored(tx.rows_from(key, 0) if totals else [], messages)
    new = [
        m if m.timestamp is not None else attrs.evolve(m, timestamp=manager.clock())
        for m in messages[match.start :]
    ]
    inserted = _import_rows(tx, key, totals, new, match.start, None) if new else []
    saved = _save_summary(tx, key, summary, lambda covers: covered_id(covers, match, inserted))
    return ImportResult(tuple(inserted), match.start, saved)


def _save_summary(
    tx: Transaction,
    key: Key,
    summary: ImportedSummary | None,
    through: Callable[[int | None], int | None],
) -> bool:
    """Save ``summary`` when the stored one is missing or older (``through``: the row its
    ``covers_messages`` names here); whether it was saved."""
    current = tx.summary(key)
    if summary is None or (current is not None and current.updated_at >= summary.updated_at):
        return False
    tx.save_summary(
        key,
        Summary(
            summary=summary.summary,
            updated_at=summary.updated_at,
            covers_through_id=through(summary.covers_messages),
        ),
    )
    return True


def _import_rows(
    tx: Transaction,
    key: Key,
    totals: ConversationTotals | None,
    new: Sequence[Message],
    skipped: int,
    follow: Follow | None,
) -> list[StoredMessage]:
    """Record the ``new`` messages of an import (those after the ``skipped`` ones; the first
    after the row ``follow`` names, which ``follow_in`` made the active leaf)."""
    # An import is not activity: the conversation was last active at its newest row.
    newest = max(m.timestamp or 0 for m in new)
    inserted, _ = record_in(
        tx,
        key,
        totals,
        new,
        max_tool_result_chars=0,
        now=max(newest, totals.last_activity if totals else 0),
        first_index=skipped,
        follow=follow,
    )
    return inserted


def import_tree(
    manager: ChatHistoryManager,
    key: Key,
    tree: ImportTree,
    summary: ImportedSummary | None = None,
) -> ImportResult:
    """Restore a tree of messages in one write transaction: each message the conversation
    holds on any branch is skipped, as is one deleted here since and what was new below it
    (policy.imports.match_tree); the rest are recorded by the rules of ``append`` on their
    parent's path (no cut again, no retention, as ``import_conversation``). When anything was
    added, the active leaf is the tree's (the path ``switchBranch`` would pick from it when
    rows follow it here), else the one before; a re-import changes nothing.

    Returns the rows inserted, how many messages were skipped and whether ``summary`` was
    saved. Raises InvalidParams naming the row among ``tree.messages``, StorageError."""
    with manager.lock:
        return manager.write((key,), lambda tx: _import_tree_with(manager, tx, key, tree, summary))


def _import_tree_with(
    manager: ChatHistoryManager,
    tx: Transaction,
    key: Key,
    tree: ImportTree,
    summary: ImportedSummary | None,
) -> ImportResult:
    section = TreeWriting(tx)
    stored = [row for row, _ in section.rows(key)] if tx.totals(key) else []
    match = match_tree(stored, tree.messages, tree.parents)
    ids = list(match.stored_ids)
    inserted: list[StoredMessage] = []
    if match.new:
        before = tx.last_id(key)
        now = manager.clock()
        for run in _runs(match.new, tree.parents):
            parent_index = tree.parents[run[0]]
            parent = None if parent_index is None else ids[parent_index]
            totals = follow_in(tx, key, Follow(parent), now, quiet=True)
            messages = [
                m if m.timestamp is not None else attrs.evolve(m, timestamp=now)
                for m in (tree.messages[i] for i in run)
            ]
            rows = _import_rows(tx, key, totals, messages, run[0], Follow(parent))
            for index, row in zip(run, rows, strict=True):
                ids[index] = row.id
            inserted.extend(rows)
        active = len(tree.messages) - 1 if tree.active is None else tree.active
        target = ids[active] if tree.messages and ids[active] is not None else before
        _settle(tx, section, key, target, now)
        if before is not None and not _on_path(section, key, before):
            section.mark_switched(key)
    saved = _save_summary(tx, key, summary, lambda covers: tree_covered_id(covers, ids))
    return ImportResult(tuple(inserted), len(tree.messages) - len(match.new), saved)


def _runs(new: Sequence[int], parents: Sequence[int | None]) -> list[list[int]]:
    """The new messages in runs, each message of a run following the one before it."""
    runs: list[list[int]] = []
    for index in new:
        if runs and parents[index] == runs[-1][-1]:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _settle(tx: Transaction, section: TreeWriting, key: Key, target: int | None, now: int) -> None:
    """Row ``target`` on the active path, with what ``switchBranch`` follows below it."""
    if target is None:
        return
    node = section.node(key, target)
    if node is None or node.active:
        return
    switch, nodes = branch_switch(section, key, target, down=True)
    activate_in(tx, key, switch, now, quiet=True, branch=nodes)


def _on_path(section: TreeWriting, key: Key, row_id: int) -> bool:
    node = section.node(key, row_id)
    return node is not None and node.active
