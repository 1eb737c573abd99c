"""The history family: ``chatHistory/append``, ``get``, ``clear``, ``format``, ``prepare``,
``getSummary``, ``saveSummary`` and ``deleteSummary`` — their params, argument checks, result
translators and handlers (one ``service.history`` call each)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import ProviderAlias
from chat_history.wire.checks import (
    MAX_MESSAGES,
    MAX_PAGE,
    MAX_SUMMARY_CHARS,
    check_int,
    check_text,
    model_arg,
)
from chat_history.wire.messages import (
    MessageIn,
    ToolIn,
    to_message,
    to_tools,
)
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import (
    KeyParams,
    wire,
    wire_message,
    wire_prune,
    wire_summary,
)
from chat_history.wire.transport import frames

if TYPE_CHECKING:
    from chat_history.service.history import AppendResult, GetResult
    from chat_history.service.preparation import PrepareOptions


@attrs.define
class AppendParams(KeyParams):
    """``append``: the messages to store, 1 to ``MAX_MESSAGES`` of them."""

    messages: list[MessageIn] = attrs.field(kw_only=True)


@attrs.define
class GetParams(KeyParams):
    """``get``: the newest ``limit`` rows (all when absent), older than ``beforeId`` when given."""

    limit: int | None = None
    before_id: int | None = None


@attrs.define
class FormatParams(KeyParams):
    """``format``: the provider kind or alias, the model and the tools of the request to shape."""

    provider: str | None = None
    model: str | None = None
    tools: list[ToolIn] | None = None


@attrs.define
class PrepareParams(FormatParams):
    """``prepare``: ``format``'s params and what shapes the window (extra tokens, overflow recovery,
    the tool context kept)."""

    extra_tokens: int | None = None
    overflow_recovery: bool | None = None
    keep_tool_context_turns: int | None = None
    #: version 4: the interrupted newest row the body continues
    continue_id: int | None = None


@attrs.define
class SaveSummaryParams(KeyParams):
    """``saveSummary``: the summary text and the newest row it covers (none: it covers no particular
    row)."""

    summary: str = attrs.field(kw_only=True)
    covers_through_id: int | None = None


def to_messages(
    params: AppendParams, aliases: Mapping[str, ProviderAlias] | None = None
) -> list[Message]:
    """``append``'s messages checked into Messages, in order (``aliases``: the settings'
    ``chatHistory.providers``, which fill an ``originAlias``)."""
    if not 1 <= len(params.messages) <= MAX_MESSAGES:
        raise InvalidParams(
            "messages", f"must hold 1 to {MAX_MESSAGES:,} messages (got {len(params.messages):,})"
        )
    return [to_message(m, f"messages[{i}]", aliases) for i, m in enumerate(params.messages)]


def get_args(params: GetParams) -> tuple[int | None, int | None]:
    """``chatHistory/get``'s page: (limit, beforeId), range-checked."""
    return (
        check_int(params.limit, "limit", 1, MAX_PAGE),
        check_int(params.before_id, "beforeId", 0),
    )


def format_args(params: FormatParams) -> tuple[str | None, str | None]:
    """``chatHistory/format``'s (provider, model). Its tools are checked as ``prepare``'s are,
    though the whole history is sent whatever they are."""
    to_tools(params.tools)
    return params.provider, params.model


def prepare_options(params: PrepareParams) -> PrepareOptions:
    """``chatHistory/prepare``'s options, range-checked."""
    from chat_history.service.preparation import PrepareOptions  # lazily: it loads every provider

    return PrepareOptions(
        provider=params.provider,
        model=model_arg(params.model),
        tools=to_tools(params.tools),
        extra_tokens=check_int(params.extra_tokens, "extraTokens", 0) or 0,
        overflow_recovery=bool(params.overflow_recovery),
        keep_tool_context_turns=check_int(
            params.keep_tool_context_turns, "keepToolContextTurns", 0
        ),
        continue_id=check_int(params.continue_id, "continue_id", 0),
    )


def summary_args(params: SaveSummaryParams) -> tuple[str, int | None]:
    """``chatHistory/saveSummary``'s (summary, coversThroughId), checked."""
    return (
        check_text(params.summary, "summary", MAX_SUMMARY_CHARS),
        check_int(params.covers_through_id, "coversThroughId", 0),
    )


def wire_append(result: AppendResult) -> dict[str, Any]:
    """``append``'s answer: the stored rows one for one with the request's messages, and what
    retention deleted."""
    return {"messages": wire(result.messages), "pruned": wire_prune(result.pruned)}


def wire_get(result: GetResult) -> dict[str, Any]:
    """Each row's wire dict is made as the answer is written (a JsonArray), so an unlimited
    ``get`` never holds a dict per row of the whole history at once."""
    return {
        "messages": frames.JsonArray(result.messages, wire_message),
        "summary": wire_summary(result.summary),
        "pruned": wire_prune(result.pruned),
        "hasMore": result.has_more,
    }


def wire_cleared(deleted_messages: int) -> dict[str, Any]:
    """``clear``'s answer: how many rows went."""
    return {"deletedMessages": deleted_messages}


def wire_deleted(deleted: bool) -> dict[str, Any]:
    """``chatHistory/deleteSummary``'s result."""
    return {"deleted": deleted}


# -- handlers


def append(m: ChatHistoryManager, ls: Session, p: AppendParams) -> Any:
    """``chatHistory/append``: store the messages (retention runs in the same write)."""
    return wire_append(history.append(m, ls.key(p), to_messages(p, m.settings.providers)))


def get(m: ChatHistoryManager, ls: Session, p: GetParams) -> Any:
    """``chatHistory/get``: the history after retention; the newest ``limit`` rows when paged."""
    return wire_get(history.get(m, ls.key(p), *get_args(p)))


def format_(m: ChatHistoryManager, ls: Session, p: FormatParams) -> Any:
    """``chatHistory/format``: the whole history as one provider's request body."""
    return wire(history.format(m, ls.key(p), *format_args(p)))


def prepare(m: ChatHistoryManager, ls: Session, p: PrepareParams) -> Any:
    """``chatHistory/prepare``: the history fitted to the model's window, as a provider request."""
    return wire(history.prepare(m, ls.key(p), prepare_options(p)))


def save_summary(m: ChatHistoryManager, ls: Session, p: SaveSummaryParams) -> Any:
    """``chatHistory/saveSummary``: store the conversation's summary, replacing any."""
    return wire(history.save_summary(m, ls.key(p), *summary_args(p)))


def get_summary(m: ChatHistoryManager, ls: Session, p: KeyParams) -> Any:
    """``chatHistory/getSummary``: the summary, or null."""
    return wire_summary(history.get_summary(m, ls.key(p)))


def delete_summary(m: ChatHistoryManager, ls: Session, p: KeyParams) -> Any:
    """``chatHistory/deleteSummary``: delete the summary; whether there was one."""
    return wire_deleted(history.delete_summary(m, ls.key(p)))


def clear(m: ChatHistoryManager, ls: Session, p: KeyParams) -> Any:
    """``chatHistory/clear``: delete the conversation whole: rows, summary, title, metadata."""
    return wire_cleared(history.clear(m, ls.key(p)))


METHODS = (
    Method("chatHistory/append", AppendParams, append),
    Method("chatHistory/get", GetParams, get),
    Method("chatHistory/format", FormatParams, format_),
    Method("chatHistory/prepare", PrepareParams, prepare),
    Method("chatHistory/saveSummary", SaveSummaryParams, save_summary),
    Method("chatHistory/getSummary", KeyParams, get_summary),
    Method("chatHistory/deleteSummary", KeyParams, delete_summary),
    Method("chatHistory/clear", KeyParams, clear),
)
