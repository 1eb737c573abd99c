"""The reads behind a history view of one kind of conversation, those whose ids start with a
prefix (the ACP proxy's sessions, docs/acp.md "The history view"): a workspace's such
conversations as their fingerprints (record, totals and reply state: policy.changes), which of
them commits changed since a change position (store.changes' marks), and the automatic titles
of the few a page shows: none is read for a row that no page shows."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping

import attrs

from chat_history.model import Key
from chat_history.policy.changes import Fingerprint
from chat_history.policy.titles import auto_title
from chat_history.service.manager import ChatHistoryManager


@attrs.frozen
class Scan:
    """A workspace's conversations of the prefix that exist, and the change position read
    before them (a commit after it is found again by ``changes``, never missed)."""

    position: int
    found: dict[str, Fingerprint]


@attrs.frozen
class Changes:
    """What commits changed since a position: the position now, and per workspace each changed
    conversation of the prefix with its fingerprint now (None: it no longer exists)."""

    position: int
    changed: dict[str, dict[str, Fingerprint | None]]


def position(manager: ChatHistoryManager) -> int:
    """The change counter now (one small read). Raises StorageError."""
    with manager.lock, manager.store.read() as reading:
        return reading.change_position()


def scan(manager: ChatHistoryManager, workspace: str, prefix: str) -> Scan:
    """Every conversation of ``workspace`` whose id starts with ``prefix``, by id.
    Raises StorageError."""
    with manager.lock, manager.store.snapshot() as tx:
        at = tx.change_position()
        found = tx.fingerprints(workspace)
    return Scan(at, {c: f for c, f in found.items() if c.startswith(prefix)})


def changes(
    manager: ChatHistoryManager,
    known: Mapping[str, Collection[str]],
    prefix: str,
    after: int,
) -> Changes:
    """The conversations of the prefix in the workspaces of ``known`` (each with the ids its
    caller holds) that commits changed since the counter was ``after``. When none committed,
    that is one small read. Raises StorageError."""
    now = position(manager)
    if now == after or not known:
        return Changes(now, {})
    changed: dict[str, dict[str, Fingerprint | None]] = {}
    with manager.lock, manager.store.snapshot() as tx:
        now = tx.change_position()  # before the marks: a commit after it is found again
        floor_passed = tx.change_floor() > after
        for workspace, ids in known.items():
            marked = {c for c in tx.changed_in(workspace, after) if c.startswith(prefix)}
            if floor_passed:  # the marks of conversations that went were deleted since
                marked |= set(ids) - tx.conversation_ids(workspace)
            if marked:
                found, _ = tx.refresh(workspace, {}, marked)
                changed[workspace] = {c: found.get(c) for c in marked}
    return Changes(now, changed)


def auto_titles(
    manager: ChatHistoryManager, workspace: str, ids: Collection[str]
) -> dict[str, str]:
    """The automatic titles of the conversations ``ids`` of ``workspace`` (those with no user
    title: ``conversations.describe``'s rule) that have one, each read as it stands (no
    snapshot: a page's rows need not agree). Raises StorageError."""
    out: dict[str, str] = {}
    with manager.lock, manager.store.read() as reading:
        for conversation in ids:
            with contextlib.closing(reading.user_rows(Key(workspace, conversation))) as rows:
                title = auto_title(rows)
            if title is not None:
                out[conversation] = title
    return out


def holders(manager: ChatHistoryManager, conversation: str) -> list[str]:
    """The workspaces that hold a conversation with this id (a scan of every record: for the
    rare request that names a session and no folder). Raises StorageError."""
    with manager.lock, manager.store.snapshot() as tx:
        found = tx.listing(None, None, None)
    return sorted({r.workspace for r in found if r.conversation == conversation})


def cursor_key(manager: ChatHistoryManager) -> bytes:
    """The key that authenticates this database's listing cursors (policy.cursor), so that a
    page's cursor is refused by any other database, as ``listConversations``' are.
    Raises StorageError."""
    with manager.lock, manager.store.read() as reading:
        return reading.cursor_key()
