"""Calibrated estimates (semantics.md "Version 2" → Calibrated estimates): the server's token
estimate (bytes / 4) scaled by what providers actually count.

A client reports, for a request it sent, the provider's ``promptTokens`` against the
``rawEstimatedTokens`` the server gave it; the ratio, clipped to [0.25, 4], joins the samples of
the request's (provider kind, model). The factor is the median of the newest 20 ratios, 1.0 with
none. ``prepare`` multiplies every estimate it compares with the budget, the compaction trigger
or the window by that factor (rounded up); stored rows' ``tokens``, retention and ``format``
stay uncalibrated. Pure: the store keeps the samples, this module only computes with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

import attrs

from chat_history.errors import InvalidParams
from chat_history.policy.budget import Route, resolve_route
from chat_history.settings import Settings

#: Every ratio is clipped into [RATIO_MIN, RATIO_MAX]: a wild report moves the factor, never
#: to nonsense (and one absurd figure cannot be refused after the provider already answered).
RATIO_MIN = 0.25
RATIO_MAX = 4.0
#: The factor is the median of the newest this many ratios of a key.
WINDOW = 20


@attrs.frozen
class CalibrationKey:
    """Whose samples a ratio joins: the provider kind and the model (None is its own key)."""

    kind: str
    model: str | None


def key_of(route: Route) -> CalibrationKey:
    """The key of a request's route: an alias resolves to its kind and, when the request named
    no model, to the alias's model (``resolve_route`` does both)."""
    return CalibrationKey(route.kind, route.model)


def usage_key(provider: str | None, model: str | None, settings: Settings) -> CalibrationKey:
    """The key ``reportUsage`` records under: ``provider`` (default ``activeProvider``) as a
    kind or an alias, as ``prepare`` resolves it. An unknown name is InvalidParams ``provider``."""
    return key_of(resolve_route(provider or settings.active_provider, model, settings))


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParams(field, "must be an integer")
    if value < 1:
        raise InvalidParams(field, "must be at least 1")
    return value


def check_usage(estimated_tokens: object, prompt_tokens: object) -> tuple[int, int]:
    """``reportUsage``'s figures as positive integers; zero, negative or non-integer figures are
    InvalidParams naming the field. Large ones are accepted (their ratio is clipped)."""
    return (
        _positive_int(estimated_tokens, "estimated_tokens"),
        _positive_int(prompt_tokens, "prompt_tokens"),
    )


def usage_ratio(estimated_tokens: int, prompt_tokens: int) -> float:
    """``promptTokens / estimatedTokens`` clipped to [0.25, 4] (exact, so that figures too
    large for a float still give a ratio)."""
    ratio = Fraction(prompt_tokens, estimated_tokens)
    return float(min(max(ratio, Fraction(RATIO_MIN)), Fraction(RATIO_MAX)))


@attrs.frozen
class Calibration:
    """A key's factor and how many samples it comes from (at most WINDOW)."""

    factor: float = 1.0
    samples: int = 0

    def apply(self, raw: int) -> int:
        """``ceil(raw x factor)``, computed on the factor's shortest decimal form so that
        100 x 1.1 is 110 as written, not 111 from binary floating point."""
        if self.factor == 1.0:
            return raw
        return math.ceil(Decimal(raw) * Decimal(repr(self.factor)))


#: No samples: estimates as they are.
UNCALIBRATED = Calibration()


def calibration_of(ratios: Sequence[float]) -> Calibration:
    """The factor of a key whose ratios are ``ratios``, oldest first: the median of the newest
    WINDOW (the mean of the middle two for an even count), 1.0 with none."""
    newest = sorted(ratios[-WINDOW:])
    count = len(newest)
    if count == 0:
        return UNCALIBRATED
    middle = count // 2
    factor = newest[middle] if count % 2 else (newest[middle - 1] + newest[middle]) / 2
    return Calibration(factor=factor, samples=count)
