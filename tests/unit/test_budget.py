"""Route resolution and the effective context budget (semantics.md, prepare steps 1 and 2)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from chat_history.errors import InvalidParams
from chat_history.policy.budget import (
    UNKNOWN_WINDOW_FALLBACK,
    Route,
    effective_budget,
    resolve_route,
)
from chat_history.settings import PROVIDER_KINDS, ContextSettings, Settings, load_settings


def settings_with(raw: dict[str, Any]) -> Settings:
    loaded = load_settings(raw)
    assert loaded.problems == ()
    return loaded.settings


ALIASES = {
    "providers": {
        "claude": {"provider": "anthropic", "model": "claude-big", "contextWindow": 200_000},
        "tiny": {"provider": "ollama", "model": "llama-8k", "contextWindow": 8_000},
        "nowindow": {"provider": "openai", "model": "gpt-x"},
        "anymodel": {"provider": "gemini", "contextWindow": 1_000_000},
    }
}


def context(**changes: Any) -> ContextSettings:
    return attrs.evolve(settings_with({}).context, **changes)


def known(window: int) -> Route:
    return Route("alias", "openai", "m", window)


UNKNOWN = Route("openai", "openai", None, None)


# --- resolve_route ---------------------------------------------------------------------------


def test_unknown_window_fallback_is_32000() -> None:
    assert UNKNOWN_WINDOW_FALLBACK == 32_000


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_kind_named_directly_has_an_unknown_window(kind: str) -> None:
    route = resolve_route(kind, None, settings_with(ALIASES))
    assert route == Route(kind, kind, None, None)


def test_a_kind_named_directly_passes_the_requested_model_on() -> None:
    route = resolve_route("anthropic", "claude-x", settings_with(ALIASES))
    assert route == Route("anthropic", "anthropic", "claude-x", None)


def test_an_alias_with_a_window_and_no_requested_model_is_known() -> None:
    route = resolve_route("claude", None, settings_with(ALIASES))
    assert route == Route("claude", "anthropic", "claude-big", 200_000)


def test_an_alias_asked_for_its_own_model_is_known() -> None:
    route = resolve_route("claude", "claude-big", settings_with(ALIASES))
    assert route.context_window == 200_000
    assert route.model == "claude-big"


def test_an_alias_asked_for_another_model_has_an_unknown_window() -> None:
    route = resolve_route("claude", "claude-small", settings_with(ALIASES))
    assert route == Route("claude", "anthropic", "claude-small", None)


def test_an_alias_without_a_model_is_known_only_when_no_model_is_requested() -> None:
    settings = settings_with(ALIASES)
    assert resolve_route("anymodel", None, settings).context_window == 1_000_000
    assert resolve_route("anymodel", "gemini-pro", settings).context_window is None
    assert resolve_route("anymodel", None, settings).model is None


def test_an_alias_without_a_context_window_is_unknown() -> None:
    route = resolve_route("nowindow", None, settings_with(ALIASES))
    assert route == Route("nowindow", "openai", "gpt-x", None)


def test_an_alias_wins_over_a_kind_of_the_same_name() -> None:
    settings = settings_with(
        {"providers": {"openai": {"provider": "openai", "model": "gpt-4o", "contextWindow": 128}}}
    )
    assert resolve_route("openai", None, settings) == Route("openai", "openai", "gpt-4o", 128)


def test_an_unknown_provider_is_invalid_params_naming_kinds_and_aliases() -> None:
    with pytest.raises(InvalidParams) as raised:
        resolve_route("nope", None, settings_with(ALIASES))
    assert raised.value.field == "provider"
    assert "unknown provider; " in raised.value.why
    assert "nope" not in raised.value.why  # the client's value is never quoted back
    assert "known kinds: openai, openai-responses, anthropic" in raised.value.why
    assert "aliases: anymodel, claude, nowindow, tiny" in raised.value.why


def test_an_unknown_provider_without_aliases_says_none() -> None:
    with pytest.raises(InvalidParams, match=r"aliases: \(none\)"):
        resolve_route("nope", None, settings_with({}))


# --- effective_budget: the scenario table ------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "route", "budget"),
    [
        pytest.param({}, known(200_000), 32_000, id="200k-window-defaults"),
        pytest.param({"compact_ratio": 0.8}, known(200_000), 160_000, id="ratio-0.8"),
        pytest.param(
            {"compact_ratio": 0.8, "max_context_tokens": 50_000},
            known(200_000),
            50_000,
            id="ratio-0.8-capped-by-max",
        ),
        pytest.param({"compact_ratio": 0.0}, known(200_000), 32_000, id="ratio-0-is-unset"),
        pytest.param({"max_context_tokens": 0}, known(200_000), 0, id="max-0-is-off"),
        pytest.param({}, known(8_000), 8_000, id="8k-window-caps-default"),
    ],
)
def test_budget_table(changes: dict[str, Any], route: Route, budget: int) -> None:
    assert effective_budget(context(**changes), route) == budget


def test_model_mismatch_uses_the_32000_window_operand() -> None:
    settings = settings_with(ALIASES)
    route = resolve_route("claude", "claude-other", settings)
    assert route.context_window is None
    assert effective_budget(context(compact_ratio=0.9), route) == 28_800


# --- effective_budget: one rule each ---------------------------------------------------------


def test_unset_settings_give_32000_with_an_unknown_window() -> None:
    assert effective_budget(context(), UNKNOWN) == 32_000


def test_max_context_tokens_is_an_absolute_budget() -> None:
    assert effective_budget(context(max_context_tokens=12_345), known(200_000)) == 12_345


def test_max_0_turns_trimming_off_even_with_a_ratio_and_pruning() -> None:
    ctx = context(
        max_context_tokens=0,
        compact_ratio=0.5,
        history_pruning_enabled=True,
        history_pruning_max_tokens=1_000,
    )
    assert effective_budget(ctx, known(200_000)) == 0
    assert effective_budget(ctx, UNKNOWN) == 0


def test_a_positive_max_is_the_window_operand_when_the_window_is_unknown() -> None:
    assert effective_budget(context(max_context_tokens=100_000), UNKNOWN) == 100_000
    ctx = context(max_context_tokens=100_000, compact_ratio=0.5)
    assert effective_budget(ctx, UNKNOWN) == 50_000


def test_a_ratio_above_1_counts_as_unset() -> None:
    assert effective_budget(context(compact_ratio=1.5), known(200_000)) == 32_000


def test_a_negative_ratio_counts_as_unset() -> None:
    assert effective_budget(context(compact_ratio=-0.5), known(200_000)) == 32_000


def test_ratio_1_is_the_whole_window() -> None:
    assert effective_budget(context(compact_ratio=1.0), known(200_000)) == 200_000


def test_a_ratio_budget_is_at_least_1() -> None:
    assert effective_budget(context(compact_ratio=0.0001), known(10)) == 1


def test_a_ratio_is_applied_as_the_decimal_the_user_wrote() -> None:
    # 100 * 0.29 is 28.999999999999996 in binary floating point.
    assert effective_budget(context(compact_ratio=0.29), known(100)) == 29


def test_an_unknown_window_applies_the_ratio_to_32000() -> None:
    assert effective_budget(context(compact_ratio=0.5), UNKNOWN) == 16_000


def test_history_pruning_lowers_the_budget() -> None:
    ctx = context(history_pruning_enabled=True, history_pruning_max_tokens=10_000)
    assert effective_budget(ctx, known(200_000)) == 10_000


def test_history_pruning_never_raises_the_budget() -> None:
    ctx = context(
        max_context_tokens=5_000, history_pruning_enabled=True, history_pruning_max_tokens=10_000
    )
    assert effective_budget(ctx, known(200_000)) == 5_000


def test_history_pruning_disabled_or_zero_changes_nothing() -> None:
    disabled = context(history_pruning_enabled=False, history_pruning_max_tokens=10_000)
    zero = context(history_pruning_enabled=True, history_pruning_max_tokens=0)
    assert effective_budget(disabled, known(200_000)) == 32_000
    assert effective_budget(zero, known(200_000)) == 32_000


def test_every_positive_budget_is_capped_by_a_known_window() -> None:
    assert effective_budget(context(max_context_tokens=100_000), known(8_000)) == 8_000
    ctx = context(history_pruning_enabled=True, history_pruning_max_tokens=50_000)
    assert effective_budget(ctx, known(8_000)) == 8_000


def test_budget_from_loaded_settings_keys() -> None:
    settings = settings_with(
        {**ALIASES, "context": {"compactRatio": 0.5, "historyPruning": {"enabled": True}}}
    )
    route = resolve_route("tiny", None, settings)
    assert effective_budget(settings.context, route) == 4_000
