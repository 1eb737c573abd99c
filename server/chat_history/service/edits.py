"""The edits family (``wire/methods/edits``; protocol.md "Version 2" → Edit, rewind): truncate,
deleteTurns and editMessage, each one write transaction on the manager, only while the newest row
is the one the client saw (``expected``). The text they delete or replace is purged at their
commit (store.seam: ``Transaction.removed_text``).

A streaming row (service.replies) is its writer's until it ends: ``editMessage`` of one is
``ReplyInProgress`` (1004) and changes nothing; ``truncate`` and ``deleteTurns`` delete it with
its reply, and its writer's next update or end is -32602 ``id``.

None of these runs storage retention or sends ``chatHistory/trimmed``: the client asked for
exactly this change, and it is made on the rows the client saw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from chat_history.errors import ConversationChanged, InvalidParams, ReplyInProgress
from chat_history.model import Attachment, Expected, Key, Message, StoredMessage
from chat_history.policy.prepare.collapse import turn_figures
from chat_history.policy.rewind import (
    check_turns,
    edited_content,
    plan_delete_turns,
    plan_truncate,
)
from chat_history.policy.tokens import stored_tokens
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Transaction


@attrs.frozen
class TruncateResult:
    """What ``truncate`` deleted: its rows, and whether the summary went with them."""

    deleted_messages: int
    summary_deleted: bool


@attrs.frozen
class DeleteTurnsResult:
    """What ``deleteTurns`` deleted: its rows, and how many of the named turns had any."""

    deleted_messages: int
    deleted_turns: int


@attrs.frozen(kw_only=True)
class MessageEdit:
    """What ``editMessage`` replaces; None leaves that part as it is."""

    content: str | None = None
    attachments: tuple[Attachment, ...] | None = None
    metadata: Mapping[str, Any] | None = None


# -- the operations --------------------------------------------------------------------------------


def truncate(
    manager: ChatHistoryManager, key: Key, from_id: int, expected: Expected = None
) -> TruncateResult:
    """Delete row ``from_id`` and every later row (and a summary covering them), only while
    the newest row is the ``expected`` one (when given).
    Raises InvalidParams ``from_id``, ConversationChanged, StorageError."""
    with manager.lock:
        return manager.write(
            (key,), lambda tx: _truncate_in(tx, key, from_id, manager.clock(), expected)
        )


def delete_turns(
    manager: ChatHistoryManager, key: Key, turns: Sequence[int], expected: Expected = None
) -> DeleteTurnsResult:
    """Delete every row of the named turns, only while the newest row is the ``expected``
    one (when given). Raises InvalidParams ``turns``/``turns[i]``, ConversationChanged."""
    check_turns(turns)
    with manager.lock:
        return manager.write(
            (key,), lambda tx: _delete_turns_in(tx, key, turns, manager.clock(), expected)
        )


def edit_message(
    manager: ChatHistoryManager,
    key: Key,
    row_id: int,
    edit: MessageEdit,
    expected: Expected = None,
) -> StoredMessage:
    """Replace a row's content, attachments and/or metadata in place, only while the newest
    row is the ``expected`` one (when given); returns the row as now stored.
    Raises InvalidParams ``id``/``content``, ConversationChanged, ReplyInProgress (a
    streaming row), StorageError."""
    cut = manager.settings.max_tool_result_chars
    with manager.lock:

        def edit_in(tx: Transaction) -> StoredMessage:
            return _edit_message_in(
                tx,
                key,
                row_id,
                edit,
                max_tool_result_chars=cut,
                now=manager.clock(),
                expected=expected,
            )

        return manager.write((key,), edit_in)


# -- the steps, each on the operation's transaction ------------------------------------------------


def check_expected(tx: Transaction, key: Key, expected: Expected) -> None:
    """A rewind from a stale view changes nothing: ConversationChanged when the conversation's
    newest row is not the one the client saw."""
    if expected is None:
        return
    last = tx.last_id(key)
    if last != expected.last_id:
        raise ConversationChanged(last)


def _truncate_in(
    tx: Transaction, key: Key, from_id: int, now: int, expected: Expected = None
) -> TruncateResult:
    """Delete row ``from_id`` and every later row, and a summary covering any of them."""
    check_expected(tx, key, expected)
    if tx.row(key, from_id) is None:
        raise InvalidParams("from_id", "is not a message of this conversation")
    summary = tx.summary(key)
    plan = plan_truncate(
        tx.rows_from(key, from_id), from_id, summary.covers_through_id if summary else None
    )
    tx.delete_messages(key, plan.deleted)
    if plan.summary_deleted:
        tx.delete_summary(key)
    tx.touch(key, now)
    return TruncateResult(len(plan.deleted), plan.summary_deleted)


def _delete_turns_in(
    tx: Transaction, key: Key, turns: Sequence[int], now: int, expected: Expected = None
) -> DeleteTurnsResult:
    """Delete every row of the named turns (numbers naming no turn are ignored)."""
    check_expected(tx, key, expected)
    plan = plan_delete_turns(tx.rows_of_turns(key, turns), turns)
    if plan.deleted:
        tx.delete_messages(key, plan.deleted)
        tx.touch(key, now)
    return DeleteTurnsResult(len(plan.deleted), plan.deleted_turns)


def _edit_message_in(
    tx: Transaction,
    key: Key,
    row_id: int,
    edit: MessageEdit,
    *,
    max_tool_result_chars: int,
    now: int,
    expected: Expected = None,
) -> StoredMessage:
    """Replace a row's content, attachments and/or metadata in place; its tokens, its turn's
    figures and the conversation's totals follow."""
    check_expected(tx, key, expected)
    row = tx.row(key, row_id)
    if row is None:
        raise InvalidParams("id", "is not a message of this conversation")
    if row.status == "streaming":
        # Its writer's next update or its end would write over the edit (issue 43 item 2).
        raise ReplyInProgress(row_id)
    changed = row
    if edit.content is not None:
        changed = attrs.evolve(
            changed, content=edited_content(row, edit.content, max_tool_result_chars)
        )
    if edit.attachments is not None:
        changed = attrs.evolve(changed, attachments=edit.attachments)
    if edit.metadata is not None:
        changed = attrs.evolve(changed, metadata=edit.metadata)
    # Estimated as a new row (a stored row answers with the estimate it was stored with).
    fresh = Message(**{f.name: getattr(changed, f.name) for f in attrs.fields(Message)})
    changed = attrs.evolve(changed, tokens=stored_tokens(fresh))
    tx.update_message(key, row, changed)
    refigure_turn(tx, key, changed.turn)
    tx.touch(key, now)
    return changed


def refigure_turn(tx: Transaction, key: Key, turn: int) -> None:
    """Record the edited turn's figures again when it is a completed turn that has them."""
    totals = tx.totals(key)
    if totals is None or turn >= totals.last_turn:
        return  # the running turn has no figures
    tx.replace_turn_figures(key, turn, turn_figures(tx.turn_rows(key, turn)).as_tuple())
