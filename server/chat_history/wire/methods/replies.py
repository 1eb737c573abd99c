"""The wire of replies in flight (protocol.md "Version 4" → Replies in flight):
``chatHistory/beginReply``, ``updateReply`` and ``endReply`` — their params, the checks that
name each bad field, the handlers (one ``service.replies`` call each) and the result translators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Origin, ToolCall
from chat_history.service import replies
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import ProviderAlias
from chat_history.wire import checks, messages, protocol
from chat_history.wire.messages import MessageIn, ToolCallIn
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import ABSENT, KeyParams


@attrs.define
class BeginReplyParams(KeyParams):
    """``beginReply``: a new streaming row (its first fields in ``message``), or ``continueId``."""

    expected_last_id: Any = ABSENT
    continue_id: int | None = None
    message: dict[str, Any] | None = None


@attrs.define
class UpdateReplyParams(KeyParams):
    """``updateReply``: a delta or a whole text, and the tool calls or providerData replaced."""

    id: int = attrs.field(kw_only=True)
    content_delta: str | None = None
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    provider_data: dict[str, Any] | None = None


@attrs.define
class EndReplyParams(KeyParams):
    """``endReply``: how the reply ended, and its final fields."""

    id: int = attrs.field(kw_only=True)
    status: str = attrs.field(kw_only=True)
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    provider_data: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: version 5: where the reply's providerData was minted, or the alias it was sent to
    origin: Any = None
    origin_alias: Any = None


_END_STATUSES = ("complete", "interrupted", "discard")
_MESSAGE_FIELDS = frozenset(
    {"content", "toolCalls", "providerData", "metadata", "origin", "originAlias"}
)


def begin_options(
    p: BeginReplyParams, aliases: Mapping[str, ProviderAlias] | None = None
) -> replies.ReplyBegin:
    """``beginReply``'s arguments checked (``continue_id``, ``message.*``; ``aliases`` fill
    ``message.originAlias``)."""
    expected = checks.expected_last(cast(Any, p))
    if p.continue_id is not None:
        if p.message is not None:
            raise InvalidParams("message", "is not allowed with continue_id")
        return replies.ReplyBegin(
            continue_id=checks.row_id(p.continue_id, "continue_id"), expected=expected
        )
    if p.message is None:
        return replies.ReplyBegin(expected=expected)
    extra = sorted(set(p.message) - _MESSAGE_FIELDS)
    if extra:
        raise InvalidParams(f"message.{extra[0]}", "is not a field of a reply's message")
    raw = protocol.structure({**p.message, "role": "assistant"}, MessageIn)
    if raw.content is None:
        raw.content = ""
    return replies.ReplyBegin(
        message=messages.to_message(raw, "message", aliases), expected=expected
    )


def _calls(raw: list[ToolCallIn] | None) -> tuple[ToolCall, ...] | None:
    if raw is None:
        return None
    checked = messages.to_message(
        MessageIn(role="assistant", content="", tool_calls=raw), "reply"
    ).tool_calls
    return checked


def change_of(
    p: UpdateReplyParams | EndReplyParams, aliases: Mapping[str, ProviderAlias] | None = None
) -> replies.ReplyChange:
    """The fields an update or end carries, checked (``content_delta``, ``tool_calls[i]``, …;
    an end's ``origin``, or ``originAlias`` filled from ``aliases``)."""
    delta = getattr(p, "content_delta", None)
    if delta is not None and p.content is not None:
        raise InvalidParams("content", "is not allowed with content_delta")
    if delta is not None:
        checks.check_text(delta, "content_delta", replies.MAX_TEXT_CHARS)
    if p.content is not None:
        checks.check_text(p.content, "content", replies.MAX_TEXT_CHARS)
    try:
        calls = _calls(p.tool_calls)
    except InvalidParams as exc:  # reply.toolCalls[0].id → tool_calls[0].id
        raise InvalidParams(exc.field.removeprefix("reply."), exc.why) from None
    metadata = getattr(p, "metadata", None)
    return replies.ReplyChange(
        content_delta=delta,
        content=p.content,
        tool_calls=calls,
        provider_data=(
            checks.check_json(p.provider_data, "provider_data")
            if p.provider_data is not None
            else None
        ),
        metadata=checks.check_json(metadata, "metadata") if metadata is not None else None,
        origin=_origin(p, aliases),
    )


def _origin(
    p: UpdateReplyParams | EndReplyParams, aliases: Mapping[str, ProviderAlias] | None
) -> Origin | None:
    """An end's ``origin``/``originAlias``, checked (an update carries none)."""
    if not isinstance(p, EndReplyParams):
        return None
    try:
        return messages.to_origin(p.origin, p.origin_alias, "reply", aliases)
    except InvalidParams as exc:  # reply.origin.provider → origin.provider
        raise InvalidParams(exc.field.removeprefix("reply."), exc.why) from None


def begin_reply(m: ChatHistoryManager, ls: Session, p: BeginReplyParams) -> Any:
    """``chatHistory/beginReply`` → the streaming StoredMessage."""
    options = begin_options(p, m.settings.providers)
    return protocol.wire_message(replies.begin(m, ls.key(p), options))


def update_reply(m: ChatHistoryManager, ls: Session, p: UpdateReplyParams) -> Any:
    """``chatHistory/updateReply`` → ``{"id", "length"}``."""
    key = ls.key(p)
    row = checks.row_id(p.id, "id")
    return {"id": row, "length": replies.update(m, key, row, change_of(p))}


def end_reply(m: ChatHistoryManager, ls: Session, p: EndReplyParams) -> Any:
    """``chatHistory/endReply`` → ``{"message", "pruned"}``."""
    key = ls.key(p)
    row = checks.row_id(p.id, "id")
    if p.status not in _END_STATUSES:
        raise InvalidParams("status", f"must be one of {', '.join(_END_STATUSES)}")
    status = cast(replies.EndStatus, p.status)
    return wire_end(replies.end(m, key, row, status, change_of(p, m.settings.providers)))


def wire_end(result: replies.EndResult) -> dict[str, Any]:
    """``endReply``'s answer: the row as stored (null when discarded) and what retention did."""
    row = result.message
    return {
        "message": protocol.wire_message(row) if row is not None else None,
        "pruned": protocol.wire_prune(result.pruned),
    }


METHODS = (
    Method("chatHistory/beginReply", BeginReplyParams, begin_reply),
    Method("chatHistory/updateReply", UpdateReplyParams, update_reply),
    Method("chatHistory/endReply", EndReplyParams, end_reply),
)
