"""The writes of an import (``service.imports`` for other tools' sessions, the CLI's ``import``
for an export): a conversation's messages restored in one write transaction, those it already
holds skipped (``policy.imports``), with the summary when newer than the stored one."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from chat_history.model import Key, Message, StoredMessage, Summary
from chat_history.policy.imports import covered_id, match_stored
from chat_history.service.manager import ChatHistoryManager, record_in
from chat_history.store import ConversationTotals, Transaction


@attrs.frozen
class ImportedSummary:
    """A summary from an export; it covered the first ``covers_messages`` exported messages."""

    summary: str
    updated_at: int
    covers_messages: int | None


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
    inserted = _import_rows(tx, key, totals, new, match.start) if new else []
    saved = False
    current = tx.summary(key)
    if summary is not None and (current is None or current.updated_at < summary.updated_at):
        through = covered_id(summary.covers_messages, match, inserted)
        tx.save_summary(
            key,
            Summary(
                summary=summary.summary,
                updated_at=summary.updated_at,
                covers_through_id=through,
            ),
        )
        saved = True
    return ImportResult(tuple(inserted), match.start, saved)


def _import_rows(
    tx: Transaction,
    key: Key,
    totals: ConversationTotals | None,
    new: Sequence[Message],
    skipped: int,
) -> list[StoredMessage]:
    """Record the ``new`` messages of an import (those after the ``skipped`` ones)."""
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
    )
    return inserted
