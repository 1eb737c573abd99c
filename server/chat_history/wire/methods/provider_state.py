"""The provider state family (protocol.md "Version 5" → Provider state that stays valid):
``chatHistory/saveCompaction`` and ``chatHistory/reportProviderError`` — their params, the
checks that name each bad field (never quoting a reported error), the handlers (one
``service.provider_state`` call each) and the result translators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import NativeCompaction, Origin
from chat_history.service import provider_state
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import ProviderAlias
from chat_history.wire.checks import check_id, check_int, check_json, model_arg, row_id
from chat_history.wire.messages import to_origin
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import KeyParams

#: The most items one native compaction holds (a compaction item and what came with it).
MAX_COMPACTION_ITEMS = 1_000


@attrs.define
class SaveCompactionParams(KeyParams):
    """``saveCompaction``: the provider's own compaction of the rows through ``coversThroughId``,
    and where it was minted (``origin``, or the ``originAlias`` the client sent to)."""

    covers_through_id: int = attrs.field(kw_only=True)
    items: Any = attrs.field(kw_only=True)
    origin: Any = None
    origin_alias: Any = None


@attrs.define
class ReportProviderErrorParams(KeyParams):
    """``reportProviderError``: the target of the refused request (a kind or an alias, and the
    model) and the provider's error answer as the client received it."""

    provider: str = attrs.field(kw_only=True)
    status: int = attrs.field(kw_only=True)
    body: Any = attrs.field(kw_only=True)
    model: str | None = None


def compaction_args(
    p: SaveCompactionParams, aliases: Mapping[str, ProviderAlias]
) -> tuple[int, list[Any], Origin]:
    """``saveCompaction``'s (coversThroughId, items, origin), checked."""
    through = row_id(p.covers_through_id, "coversThroughId")
    items = p.items
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_COMPACTION_ITEMS:
        raise InvalidParams("items", f"must hold 1 to {MAX_COMPACTION_ITEMS:,} items")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidParams(f"items[{index}]", "must be an object")
    check_json(items, "items")
    try:
        origin = to_origin(p.origin, p.origin_alias, "compaction", aliases)
    except InvalidParams as exc:  # compaction.origin.provider → origin.provider
        raise InvalidParams(exc.field.removeprefix("compaction."), exc.why) from None
    if origin is None:
        raise InvalidParams("origin", "is required (or originAlias)")
    return through, items, origin


def error_args(p: ReportProviderErrorParams) -> tuple[str, str | None, int, Any]:
    """``reportProviderError``'s (provider, model, status, body), checked; the body is never
    quoted in an error."""
    status = check_int(p.status, "status", 100, 599)
    assert status is not None
    check_json(p.body, "body")
    return check_id(p.provider, "provider"), model_arg(p.model), status, p.body


def wire_compaction(saved: NativeCompaction) -> dict[str, Any]:
    """``saveCompaction``'s answer: what it stored, without its items."""
    return {
        "coversThroughId": saved.covers_through_id,
        "savedAt": saved.saved_at,
        "origin": saved.origin.as_json(),
    }


def wire_fenced(result: provider_state.Fenced) -> dict[str, Any]:
    """``reportProviderError``'s answer: what it fenced, and which refusal it was."""
    return {"fenced": result.fenced, "reason": result.reason}


def save_compaction(m: ChatHistoryManager, ls: Session, p: SaveCompactionParams) -> Any:
    """``chatHistory/saveCompaction``: store a provider's own compaction of the conversation."""
    through, items, origin = compaction_args(p, m.settings.providers)
    return wire_compaction(provider_state.save_compaction(m, ls.key(p), through, items, origin))


def report_provider_error(m: ChatHistoryManager, ls: Session, p: ReportProviderErrorParams) -> Any:
    """``chatHistory/reportProviderError``: fence the state a provider refused."""
    return wire_fenced(provider_state.report_error(m, ls.key(p), *error_args(p)))


METHODS = (
    Method("chatHistory/saveCompaction", SaveCompactionParams, save_compaction),
    Method("chatHistory/reportProviderError", ReportProviderErrorParams, report_provider_error),
)
