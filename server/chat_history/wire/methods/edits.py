"""The edits family: ``chatHistory/truncate``, ``deleteTurns`` and ``editMessage`` — their
params (each with ``expectedLastId``), argument checks and handlers."""

from __future__ import annotations

from typing import Any

import attrs

from chat_history.policy.rewind import check_turns
from chat_history.service import edits
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import (
    MAX_CONTENT_CHARS,
    check_int,
    check_json,
    check_text,
    expected_last,
    row_id,
)
from chat_history.wire.messages import AttachmentIn, to_attachment
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import (
    ABSENT,
    KeyParams,
    wire,
    wire_message,
)


@attrs.define
class TruncateParams(KeyParams):
    """``truncate``: the first row to delete."""

    from_id: int = attrs.field(kw_only=True)
    #: the newest row id the client saw (null: an empty conversation); ABSENT: no check
    expected_last_id: Any = ABSENT


@attrs.define
class DeleteTurnsParams(KeyParams):
    """``deleteTurns``: the turn numbers whose rows go."""

    turns: list[int] = attrs.field(kw_only=True)
    expected_last_id: Any = ABSENT


@attrs.define
class EditMessageParams(KeyParams):
    """``editMessage``: the row and what replaces its content, attachments and/or metadata."""

    id: int = attrs.field(kw_only=True)
    expected_last_id: Any = ABSENT
    content: str | None = None
    attachments: list[AttachmentIn] | None = None
    metadata: dict[str, Any] | None = None


def turns_arg(params: DeleteTurnsParams) -> list[int]:
    """``deleteTurns``'s turn numbers: 1-1,000 of them, none negative (``turns[i]``)."""
    check_turns(params.turns)
    for index, turn in enumerate(params.turns):
        check_int(turn, f"turns[{index}]", 0)
    return list(params.turns)


def edit_args(params: EditMessageParams) -> tuple[int, MessageEdit]:
    """``editMessage``'s (id, what it replaces), checked as ``append`` checks a message."""
    content = params.content
    if content is not None:
        check_text(content, "content", MAX_CONTENT_CHARS)
    attachments = None
    if params.attachments is not None:
        attachments = tuple(
            to_attachment(a, f"attachments[{i}]") for i, a in enumerate(params.attachments)
        )
    metadata = check_json(params.metadata, "metadata") if params.metadata is not None else None
    edit = MessageEdit(content=content, attachments=attachments, metadata=metadata)
    return row_id(params.id, "id"), edit


# -- handlers


def truncate(m: ChatHistoryManager, ls: Session, p: TruncateParams) -> Any:
    """``chatHistory/truncate``: delete row ``fromId`` and every later row."""
    from_id = row_id(p.from_id, "fromId")
    return wire(edits.truncate(m, ls.key(p), from_id, expected_last(p)))


def delete_turns(m: ChatHistoryManager, ls: Session, p: DeleteTurnsParams) -> Any:
    """``chatHistory/deleteTurns``: delete every row of the named turns."""
    return wire(edits.delete_turns(m, ls.key(p), turns_arg(p), expected_last(p)))


def edit_message(m: ChatHistoryManager, ls: Session, p: EditMessageParams) -> Any:
    """``chatHistory/editMessage``: replace a row's content, attachments or metadata in place."""
    row, edit = edit_args(p)
    return wire_message(edits.edit_message(m, ls.key(p), row, edit, expected_last(p)))


METHODS = (
    Method("chatHistory/truncate", TruncateParams, truncate),
    Method("chatHistory/deleteTurns", DeleteTurnsParams, delete_turns),
    Method("chatHistory/editMessage", EditMessageParams, edit_message),
)
