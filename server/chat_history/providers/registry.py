"""The provider kinds and the one entry point that formats stored rows for any of them.

``format_body`` runs the orphan sweep first (semantics.md, prepare step 8), so every kind module
receives a history in which each result has its call and each call its result, and then, for a
request's target, the provider state fence (``state_rules.fence``), so that a kind module renders
only the ``providerData`` its target takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.sweep import sweep_orphans
from chat_history.providers import (
    anthropic,
    bedrock,
    cache_points,
    cohere,
    gemini,
    mistral,
    native_compaction,
    ollama,
    openai,
    openai_responses,
    state_rules,
)
from chat_history.settings import PROVIDER_KINDS

Formatter = Callable[[Sequence[Message], str | None], dict[str, Any]]

KINDS: tuple[str, ...] = PROVIDER_KINDS

_FORMATTERS: dict[str, Formatter] = {
    "openai": openai.build_body,
    "openai-responses": openai_responses.build_body,
    "anthropic": anthropic.build_body,
    "gemini": gemini.build_body,
    "ollama": ollama.build_body,
    "mistral": mistral.build_body,
    "bedrock": bedrock.build_body,
    "cohere": cohere.build_body,
}
assert tuple(_FORMATTERS) == KINDS, "one formatter per provider kind, in settings order"


def format_body(
    kind: str,
    rows: Sequence[Message],
    model: str | None = None,
    *,
    swept: bool = False,
    breakpoints: bool = False,
    note: Message | None = None,
    target: state_rules.Target | None = None,
    replaced_at: int | None = None,
    native: native_compaction.Native | None = None,
) -> dict[str, Any]:
    """The body fields of ``kind``'s request that carry the conversation (protocol.md body
    table), from provider-neutral rows in stored order. Pure: no I/O, rows are not changed.
    The orphan sweep runs first unless the rows come ``swept`` already (``prepare_rows``).
    With ``breakpoints`` (``promptCache`` ``"auto"``) the body carries the prompt-cache marks
    of ``providers.cache_points``; ``note`` is the request's context note, one of ``rows``.
    With a ``target`` (every request's; its kind is ``kind``) each row's provider state goes
    only where ``state_rules`` sends it; ``replaced_at``: when the summary or compaction that
    stands in the body was saved (state bound to the conversation's prefix stays out of rows
    stored before it). Without one, version 4's rule: state goes to its kind. ``native``: a
    native compaction's items, which replace its stand-in summary in the context note."""
    formatter = _FORMATTERS.get(kind)
    if formatter is None:  # routes are resolved by policy.budget.resolve_route; this is a guard
        raise InvalidParams("provider", f"unknown provider kind; known: {', '.join(KINDS)}")
    # A streaming row is the answer being generated: no body sends it (protocol.md "Replies in
    # flight"); an interrupted one is an assistant row like any other.
    rows = [row for row in rows if row.status != "streaming"]
    sent = rows if swept else sweep_orphans(rows)
    if target is not None:
        sent = state_rules.fence(sent, target, replaced_at=replaced_at)
    placed = False
    if native is not None and kind in native_compaction.KINDS:
        sent, placed, old, new = native_compaction.without_stand_in(sent, native)
        note = new if note is old else note
    body = formatter(sent, model)
    if breakpoints:
        body = cache_points.mark(kind, body, model, cache_points.note_blocks(sent, note))
    return native_compaction.place(kind, body, native.items) if placed and native else body
