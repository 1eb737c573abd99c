"""The provider kinds and the one entry point that formats stored rows for any of them.

``format_body`` runs the orphan sweep first (semantics.md, prepare step 8), so every kind module
receives a history in which each result has its call and each call its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chat_history.errors import InvalidParams, quoted
from chat_history.model import Message
from chat_history.policy.sweep import sweep_orphans
from chat_history.providers import (
    anthropic,
    bedrock,
    cache_points,
    cohere,
    gemini,
    mistral,
    ollama,
    openai,
    openai_responses,
)
from chat_history.settings import PROVIDER_KINDS

Formatter = Callable[[Sequence[Message], str | None], dict[str, Any]]

KINDS: tuple[str, ...] = PROVIDER_KINDS

_FORMATTERS: dict[str, Formatter] = {
    "openai": openai.format,
    "openai-responses": openai_responses.format,
    "anthropic": anthropic.format,
    "gemini": gemini.format,
    "ollama": ollama.format,
    "mistral": mistral.format,
    "bedrock": bedrock.format,
    "cohere": cohere.format,
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
) -> dict[str, Any]:
    """The body fields of ``kind``'s request that carry the conversation (protocol.md body
    table), from provider-neutral rows in stored order. Pure: no I/O, rows are not changed.
    The orphan sweep runs first unless the rows come ``swept`` already (``prepare_rows``).
    With ``breakpoints`` (``promptCache`` ``"auto"``) the body carries the prompt-cache marks
    of ``providers.cache_points``; ``note`` is the request's context note, one of ``rows``."""
    formatter = _FORMATTERS.get(kind)
    if formatter is None:  # routes are resolved by policy.budget.resolve_route; this is a guard
        raise InvalidParams(
            "provider", f"unknown provider kind {quoted(kind)}; known: {', '.join(KINDS)}"
        )
    # A streaming row is the answer being generated: no body sends it (protocol.md "Replies in
    # flight"); an interrupted one is an assistant row like any other.
    rows = [row for row in rows if row.status != "streaming"]
    sent = rows if swept else sweep_orphans(rows)
    body = formatter(sent, model)
    if not breakpoints:
        return body
    return cache_points.mark(kind, body, model, cache_points.note_blocks(sent, note))
