"""The route a request goes to, its known or unknown context window, and the effective context
budget derived from them (semantics.md, "Request-time preparation" steps 1 and 2)."""

from __future__ import annotations

import math
from decimal import Decimal

import attrs

from chat_history.errors import InvalidParams, cut
from chat_history.settings import PROVIDER_KINDS, ContextSettings, Settings

#: The window operand (and default budget) when the model's capacity is unknown: a compatibility
#: stub for the arithmetic, never a reason to refuse a request.
UNKNOWN_WINDOW_FALLBACK = 32_000


@attrs.frozen
class Route:
    """Where a request goes: ``name`` as the request gave it (kind or alias), the provider
    ``kind`` whose shape the body takes, the model, and the context window (None = unknown);
    the alias's ``endpoint`` (None: the kind's public API) and state ``scope``, which say
    where provider state stays valid (``providers.state_rules``)."""

    name: str
    kind: str
    model: str | None
    context_window: int | None
    endpoint: str | None = None
    scope: str | None = None


def resolve_route(name: str, model: str | None, settings: Settings) -> Route:
    """The route for a provider kind or an alias of ``chatHistory.providers`` (an alias wins over
    a kind of the same name). The window is known only through an alias with ``contextWindow``,
    and only for the alias's own model: another requested model leaves it unknown."""
    alias = settings.providers.get(name)
    if alias is not None:
        known = alias.context_window is not None and (model is None or model == alias.model)
        return Route(
            name=name,
            kind=alias.provider,
            model=model if model is not None else alias.model,
            context_window=alias.context_window if known else None,
            endpoint=alias.endpoint,
            scope=alias.state_scope,
        )
    if name in PROVIDER_KINDS:
        return Route(name=name, kind=name, model=model, context_window=None)
    aliases = cut(", ".join(sorted(settings.providers)), 300) or "(none)"
    raise InvalidParams(
        "provider",
        f"unknown provider; known kinds: {', '.join(PROVIDER_KINDS)}; aliases: {aliases}",
    )


def _valid_ratio(ratio: float | None) -> float | None:
    if ratio is None or not math.isfinite(ratio) or not 0 < ratio <= 1:
        return None
    return ratio


def _ratio_of(window: int, ratio: float) -> int:
    # Decimal from the float's shortest repr, so that 100 x 0.29 is 29 as the user wrote it,
    # not 28 from binary floating point.
    return max(1, math.floor(Decimal(window) * Decimal(repr(ratio))))


def effective_budget(ctx: ContextSettings, route: Route) -> int:
    """The proactive trimming target of a request; 0 means trimming is off.

    In order: ``maxContextTokens = 0`` turns trimming off; a ratio in (0, 1] gives
    ``max(1, floor(window x ratio))`` capped by an explicit ``maxContextTokens``, else
    ``maxContextTokens`` or 32,000; an enabled ``historyPruning.maxTokens > 0`` lowers it; the
    window caps it. An unknown window is 32,000, or a positive ``maxContextTokens``."""
    explicit = ctx.max_context_tokens
    if explicit == 0:
        return 0
    if route.context_window is not None:
        window = route.context_window
    elif explicit is not None and explicit > 0:
        window = explicit
    else:
        window = UNKNOWN_WINDOW_FALLBACK
    ratio = _valid_ratio(ctx.compact_ratio)
    if ratio is not None:
        budget = _ratio_of(window, ratio)
        if explicit is not None:
            budget = min(budget, explicit)
    else:
        budget = explicit if explicit is not None else UNKNOWN_WINDOW_FALLBACK
    if ctx.history_pruning_enabled and ctx.history_pruning_max_tokens > 0:
        budget = min(budget, ctx.history_pruning_max_tokens)
    return min(budget, window)
