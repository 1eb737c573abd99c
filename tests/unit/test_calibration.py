"""Calibrated estimates (semantics.md "Version 2" → Calibrated estimates): ratios clipped to
[0.25, 4], the factor is the median of the newest 20 (mean of the middle two for an even count,
1.0 with none), one key per (provider kind, model), factors applied rounding up; reportUsage's
figures are positive integers; and prepare's decisions shift with the factor."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rows import A, U, as_stored

from chat_history.errors import ContextOverflow, InvalidParams
from chat_history.policy.budget import Route
from chat_history.policy.calibration import (
    RATIO_MAX,
    RATIO_MIN,
    UNCALIBRATED,
    WINDOW,
    Calibration,
    CalibrationKey,
    calibration_of,
    check_usage,
    key_of,
    usage_key,
    usage_ratio,
)
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import RequestOptions
from chat_history.policy.tokens import row_tokens
from chat_history.settings import ContextSettings, default_settings, load_settings

UNKNOWN = Route("openai", "openai", None, None)


def ctx(**changes: Any) -> ContextSettings:
    return attrs.evolve(default_settings().context, **changes)


# -- ratios ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimated", "prompt", "ratio"),
    [
        (100, 150, 1.5),
        (100, 100, 1.0),
        (100, 40, 0.4),
        (100, 400, 4.0),
        (100, 401, RATIO_MAX),
        (100, 1_000_000, RATIO_MAX),
        (100, 25, 0.25),
        (100, 24, RATIO_MIN),
        (1_000_000, 1, RATIO_MIN),
        (1, 10**400, RATIO_MAX),  # larger than any float: still a ratio
        (10**400, 1, RATIO_MIN),
    ],
)
def test_a_ratio_is_clipped_not_refused(estimated: int, prompt: int, ratio: float) -> None:
    assert usage_ratio(estimated, prompt) == ratio


@pytest.mark.parametrize("field", ["estimated_tokens", "prompt_tokens"])
@pytest.mark.parametrize("bad", [0, -1, -(10**9), 1.5, 2.0, True, "3", None, [1]])
def test_non_positive_or_non_integer_figures_are_invalid_params(field: str, bad: Any) -> None:
    figures = {"estimated_tokens": 10, "prompt_tokens": 12, field: bad}
    with pytest.raises(InvalidParams) as raised:
        check_usage(figures["estimated_tokens"], figures["prompt_tokens"])
    assert raised.value.field == field


def test_positive_integers_pass_even_absurd_ones() -> None:
    assert check_usage(1, 1) == (1, 1)
    assert check_usage(5, 10**30) == (5, 10**30)


# -- the factor ---------------------------------------------------------------------------------


def test_no_samples_is_factor_one() -> None:
    assert calibration_of([]) == Calibration(1.0, 0) == UNCALIBRATED


def test_the_factor_is_the_median_of_an_odd_count() -> None:
    assert calibration_of([3.0, 1.0, 2.0]) == Calibration(2.0, 3)


def test_an_even_count_takes_the_mean_of_the_middle_two() -> None:
    assert calibration_of([1.0, 4.0, 1.5, 2.5]) == Calibration(2.0, 4)
    assert calibration_of([0.5, 1.5]) == Calibration(1.0, 2)


def test_only_the_newest_20_ratios_count() -> None:
    old = [4.0] * 15  # would dominate the median if they counted
    newest = [1.0 + n / 100 for n in range(WINDOW)]
    out = calibration_of([*old, *newest])
    assert out.samples == WINDOW
    assert out.factor == pytest.approx((newest[9] + newest[10]) / 2)


@settings(deadline=None, max_examples=200)
@given(st.lists(st.floats(RATIO_MIN, RATIO_MAX), max_size=60))
def test_the_factor_is_a_median_of_the_window(ratios: list[float]) -> None:
    out = calibration_of(ratios)
    window = ratios[-WINDOW:]
    assert out.samples == len(window) <= WINDOW
    if not window:
        assert out.factor == 1.0
        return
    below = sum(1 for r in window if r < out.factor)
    above = sum(1 for r in window if r > out.factor)
    assert below <= len(window) // 2 and above <= len(window) // 2
    assert min(window) <= out.factor <= max(window)


def test_apply_rounds_up() -> None:
    assert Calibration(1.0, 0).apply(123) == 123
    assert Calibration(1.1, 3).apply(100) == 110  # 110.00000000000001 in binary floating point
    assert Calibration(1.25, 3).apply(3) == 4
    assert Calibration(0.25, 20).apply(5) == 2
    assert Calibration(4.0, 1).apply(0) == 0


@given(st.integers(0, 10**7), st.floats(RATIO_MIN, RATIO_MAX))
def test_apply_is_the_least_integer_at_or_above_the_product(raw: int, factor: float) -> None:
    product = raw * Fraction(repr(factor))  # the factor as its shortest decimal form reads
    out = Calibration(factor, 1).apply(raw)
    assert out - 1 < product <= out


# -- keys -------------------------------------------------------------------------------------


def aliased() -> Any:
    return load_settings(
        {
            "activeProvider": "claude",
            "providers": {
                "claude": {"provider": "anthropic", "model": "claude-sonnet", "contextWindow": 9},
                "bare": {"provider": "ollama"},
            },
        }
    ).settings


def test_an_alias_resolves_to_its_kind_and_model() -> None:
    s = aliased()
    assert usage_key("claude", None, s) == CalibrationKey("anthropic", "claude-sonnet")
    assert usage_key(None, None, s) == CalibrationKey("anthropic", "claude-sonnet")


def test_a_requested_model_replaces_the_alias_model() -> None:
    assert usage_key("claude", "claude-haiku", aliased()) == CalibrationKey(
        "anthropic", "claude-haiku"
    )


def test_a_missing_model_is_its_own_key() -> None:
    s = aliased()
    assert usage_key("anthropic", None, s) == CalibrationKey("anthropic", None)
    assert usage_key("bare", None, s) == CalibrationKey("ollama", None)
    assert usage_key("anthropic", None, s) != usage_key("anthropic", "claude-sonnet", s)


def test_the_same_model_of_two_kinds_is_two_keys() -> None:
    s = aliased()
    assert usage_key("openai", "m", s) != usage_key("mistral", "m", s)


def test_prepare_and_report_usage_share_the_key_of_a_route() -> None:
    assert key_of(Route("claude", "anthropic", "claude-sonnet", 9)) == usage_key(
        "claude", None, aliased()
    )


def test_an_unknown_provider_is_invalid_params() -> None:
    with pytest.raises(InvalidParams) as raised:
        usage_key("gpt", None, aliased())
    assert raised.value.field == "provider"


# -- prepare's decisions follow the factor --------------------------------------------------------


def turns(n: int, size: int = 400) -> list[Any]:
    return [r for i in range(n) for r in (U(f"{i}" + "u" * size), A("a" * size))]


def test_a_factor_reports_calibrated_estimates_and_the_raw_sum() -> None:
    rows = turns(2)
    raw = sum(row_tokens(r) for r in rows)
    out = prepare_rows(
        rows, RequestOptions(settings=ctx(), route=UNKNOWN, calibration=Calibration(1.5, 7))
    )
    assert out.raw_estimated_tokens == raw
    assert out.estimated_tokens == math.ceil(raw * 1.5)
    assert out.calibration == Calibration(1.5, 7)


def test_a_factor_above_one_trims_what_the_raw_estimate_would_keep() -> None:
    rows = turns(4)
    raw = sum(row_tokens(r) for r in rows)
    budget = raw + 10
    plain = prepare_rows(
        rows, RequestOptions(settings=ctx(max_context_tokens=budget), route=UNKNOWN)
    )
    assert plain.trimmed is None
    scaled = prepare_rows(
        rows,
        RequestOptions(
            settings=ctx(max_context_tokens=budget), route=UNKNOWN, calibration=Calibration(2.0, 5)
        ),
    )
    assert scaled.trimmed is not None
    assert scaled.estimated_tokens <= budget
    assert scaled.estimated_tokens == math.ceil(scaled.raw_estimated_tokens * 2.0)
    assert scaled.trimmed.tokens_before == 2 * raw
    assert scaled.trimmed.tokens_after == scaled.estimated_tokens
    (event,) = scaled.events
    assert (event.tokens_before, event.tokens_after) == (2 * raw, scaled.estimated_tokens)


def test_a_factor_below_one_keeps_what_the_raw_estimate_would_trim() -> None:
    rows = turns(4)
    raw = sum(row_tokens(r) for r in rows)
    settings_ = ctx(max_context_tokens=raw - 10)
    assert prepare_rows(rows, RequestOptions(settings=settings_, route=UNKNOWN)).trimmed is not None
    out = prepare_rows(
        rows, RequestOptions(settings=settings_, route=UNKNOWN, calibration=Calibration(0.5, 5))
    )
    assert out.trimmed is None
    assert out.rows == tuple(rows)


def test_the_window_check_is_calibrated() -> None:
    rows = turns(1)
    raw = sum(row_tokens(r) for r in rows)
    route = Route("a", "openai", "m", raw + 1)
    off = ctx(max_context_tokens=0)
    assert prepare_rows(rows, RequestOptions(settings=off, route=route)).estimated_tokens == raw
    with pytest.raises(ContextOverflow) as raised:
        prepare_rows(
            rows, RequestOptions(settings=off, route=route, calibration=Calibration(1.5, 2))
        )
    assert raised.value.estimated_tokens == math.ceil(raw * 1.5)


def test_the_compaction_trigger_is_calibrated() -> None:
    rows = as_stored(turns(6, size=200))
    raw = sum(row_tokens(r) for r in rows)
    budget = 2 * raw  # raw is half the budget: under the 0.8 trigger
    settings_ = ctx(max_context_tokens=budget, compaction_max_summary_tokens=100)
    out = prepare_rows(
        rows, RequestOptions(settings=settings_, route=UNKNOWN, propose_compaction=True)
    )
    assert out.compaction is None
    out = prepare_rows(
        rows,
        RequestOptions(
            settings=settings_,
            route=UNKNOWN,
            propose_compaction=True,
            calibration=Calibration(1.7, 3),
        ),
    )
    assert out.compaction is not None
    assert out.trimmed is None  # 1.7 x raw is still within the budget
    assert out.compaction.estimated_tokens == math.ceil(out.compaction.raw_estimated_tokens * 1.7)
