"""How a row is kept: the ``messages`` columns a query selects, and the conversions between a
selected row and ``StoredMessage`` and between a ``Message`` and the columns it is written to."""

from __future__ import annotations

import json
from typing import Any

from chat_history.model import (
    Attachment,
    Message,
    StoredMessage,
    ToolCall,
    compact_json,
    tool_calls_json,
)
from chat_history.store.engine import sqlite3
from chat_history.store.provider_state import origin_of, origin_text

#: A streaming row's text: its reply's folded text and the parts sent since (store.replies);
#: the ``messages`` column holds "" until the reply ends, so search never sees it before.
STREAMING_TEXT = (
    "COALESCE((SELECT r.content || COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) "
    "FROM reply_parts p WHERE p.reply = messages.id), '') FROM replies r "
    "WHERE r.id = messages.id), content)"
)
#: The columns every row query selects, in the order ``to_message`` reads them.
COLUMNS = (
    f"id, turn, role, CASE WHEN status = 'streaming' THEN {STREAMING_TEXT} ELSE content END, "
    "tool_calls, tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens, "
    "status, origin"
)


def _dump(value: Any) -> str | None:
    if not value:
        return None
    return compact_json(value)


def to_message(row: sqlite3.Row | tuple[Any, ...]) -> StoredMessage:
    """A row selected with ``COLUMNS`` as the stored message."""
    (
        id_,
        turn,
        role,
        content,
        tool_calls,
        tool_call_id,
        name,
        attachments,
        timestamp,
        provider_data,
        metadata,
        tokens,
        status,
        origin,
    ) = row
    found, fences = origin_of(origin)
    return StoredMessage(
        id=id_,
        turn=turn,
        role=role,
        content=content,
        tool_calls=tuple(ToolCall.from_json(c) for c in json.loads(tool_calls))
        if tool_calls
        else (),
        tool_call_id=tool_call_id,
        name=name,
        attachments=tuple(Attachment.from_json(a) for a in json.loads(attachments))
        if attachments
        else (),
        timestamp=timestamp,
        provider_data=json.loads(provider_data) if provider_data else {},
        metadata=json.loads(metadata) if metadata else {},
        tokens=tokens,
        status=status or "complete",
        origin=found,
        fences=fences,
    )


def message_columns(message: Message, timestamp: int) -> tuple[Any, ...]:
    """The values of ``message`` for the columns role .. metadata of an insert (its status is
    ``status_column``)."""
    return (
        message.role,
        message.content,
        tool_calls_json(message.tool_calls) if message.tool_calls else None,
        message.tool_call_id,
        message.name,
        _dump([a.as_json() for a in message.attachments]),
        timestamp,
        _dump(dict(message.provider_data)),
        _dump(dict(message.metadata)),
    )


def origin_column(message: Message) -> str | None:
    """The ``origin`` column of ``message``: its origin and fences (NULL: neither)."""
    return origin_text(message.origin, message.fences)


def status_column(message: Message) -> str | None:
    """The ``status`` column of ``message``: NULL for a complete row (every row before it)."""
    return None if message.status == "complete" else message.status
