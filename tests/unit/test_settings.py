"""Settings (settings.md): settings.schema.json is the one list of keys, defaults and bounds; nested
and dotted keys load; a bad value is reported (key, value, default) and replaced by its default
while the other keys still apply; unknown keys are listed; bad provider aliases are dropped."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from chat_history import settings as settings_module
from chat_history.settings import (
    PRESET_TOOL_CONTEXT_TURNS,
    PROVIDER_KINDS,
    ContextSettings,
    ProviderAlias,
    Settings,
    default_settings,
    load_settings,
    properties,
    schema,
)

REPO_SCHEMA = Path(__file__).resolve().parents[2] / "settings.schema.json"
PREFIX = "chatHistory."


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name.replace(".", "_")).lower()


def attribute(settings: Settings, key: str) -> Any:
    """The Settings value a schema key lands in (``chatHistory.context.historyPruning.maxTokens``
    → ``settings.context.history_pruning_max_tokens``)."""
    name = key.removeprefix(PREFIX)
    if name.startswith("context."):
        return getattr(settings.context, snake(name.removeprefix("context.")))
    return getattr(settings, snake(name))


def settings_attributes() -> set[str]:
    top = {f.name for f in attrs.fields(Settings) if f.name != "context"}
    nested = {"context." + f.name for f in attrs.fields(ContextSettings)}
    return top | nested


def schema_attributes() -> set[str]:
    out = set()
    for key in properties():
        name = key.removeprefix(PREFIX)
        if name.startswith("context."):
            out.add("context." + snake(name.removeprefix("context.")))
        else:
            out.add(snake(name))
    return out


def nested(key: str, value: Any) -> dict[str, Any]:
    """``chatHistory.context.historyPruning.enabled`` → {"context": {"historyPruning": {...}}}."""
    parts = key.removeprefix(PREFIX).split(".")
    raw: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        raw = {part: raw}
    return raw


def another_valid_value(spec: dict[str, Any]) -> Any:
    """A value the schema accepts that differs from the key's default."""
    default = spec["default"]
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if "enum" in spec:
        return next(v for v in spec["enum"] if v != default)
    if "boolean" in types:
        return not default
    if "integer" in types:
        return (default or 0) + 7
    if "number" in types:
        low = spec.get("exclusiveMinimum", spec.get("minimum", 0))
        high = spec.get("maximum", (default or 0) + 10)
        return (low + high) / 2 if (low + high) / 2 != default else high
    if "string" in types:
        return "anthropic" if default != "anthropic" else "openai"
    if "object" in types:
        return {"mine": {"provider": "gemini", "model": "gemini-2.5-pro", "contextWindow": 9}}
    raise AssertionError(f"no alternative for {spec}")


def loaded_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            name: ProviderAlias(
                provider=entry["provider"],
                model=entry.get("model"),
                context_window=entry.get("contextWindow"),
            )
            for name, entry in value.items()
        }
    return value


# -- the schema and Settings agree -----------------------------------------------------------------


def test_the_packaged_schema_is_the_repository_file() -> None:
    assert schema() == json.loads(REPO_SCHEMA.read_text(encoding="utf-8"))


def test_schema_keys_and_settings_fields_are_the_same_set() -> None:
    assert schema_attributes() == settings_attributes()


@pytest.mark.parametrize("key", sorted(properties()))
def test_schema_default_is_the_settings_default(key: str) -> None:
    default = properties()[key]["default"]
    assert attribute(default_settings(), key) == loaded_value(default)


@pytest.mark.parametrize("key", sorted(properties()))
def test_every_schema_key_is_loaded(key: str) -> None:
    value = another_valid_value(properties()[key])
    loaded = load_settings(nested(key, value))
    assert loaded.problems == ()
    assert loaded.unknown_keys == ()
    assert attribute(loaded.settings, key) == loaded_value(value)


@pytest.mark.parametrize("key", sorted(properties()))
def test_every_schema_key_documents_itself(key: str) -> None:
    spec = properties()[key]
    assert {"type", "default", "description"} <= spec.keys()


def test_schema_defaults_match_settings_md() -> None:
    settings = default_settings()
    assert settings.enable_auto_pruning is True
    assert settings.max_age_hours == 720
    assert settings.max_messages == 50
    assert settings.max_tokens == 32_000
    assert settings.preserve_system_messages is True
    assert settings.max_tool_result_chars == 50_000
    assert settings.context.max_context_tokens is None
    assert settings.context.compact_ratio is None
    assert settings.context.history_pruning_enabled is False
    assert settings.context.history_pruning_max_tokens == 0
    assert settings.context.max_history_turns == 50
    assert settings.context.keep_tool_context_turns is None
    assert settings.context.trim_low_water == 1.0
    assert settings.context.preset == "default"
    assert settings.context.compaction_enabled is True
    assert settings.context.compaction_trigger_ratio == 0.8
    assert settings.context.compaction_keep_recent_turns == 4
    assert settings.context.compaction_max_summary_tokens == 2_000
    assert settings.context.compaction_prompt is None
    assert settings.active_provider == "openai"
    assert dict(settings.providers) == {}


def test_schema_provider_kinds_are_the_server_kinds() -> None:
    alias = properties()[PREFIX + "providers"]["additionalProperties"]
    assert tuple(alias["properties"]["provider"]["enum"]) == PROVIDER_KINDS


@pytest.mark.parametrize(("preset", "turns"), [("default", 2), ("localModel", 1), ("unbounded", 8)])
def test_preset_sets_tool_context_turns_when_null(preset: str, turns: int) -> None:
    context = load_settings({"context": {"preset": preset}}).settings.context
    assert context.tool_context_turns() == turns == PRESET_TOOL_CONTEXT_TURNS[preset]
    explicit = load_settings({"context": {"preset": preset, "keepToolContextTurns": 0}})
    assert explicit.settings.context.tool_context_turns() == 0


# -- nested and dotted keys ------------------------------------------------------------------------


def test_nested_keys_load() -> None:
    loaded = load_settings(
        {
            "maxMessages": 20,
            "context": {"maxContextTokens": 0, "historyPruning": {"enabled": True, "maxTokens": 9}},
        }
    )
    assert loaded.problems == () and loaded.unknown_keys == ()
    assert loaded.settings.max_messages == 20
    assert loaded.settings.context.max_context_tokens == 0
    assert loaded.settings.context.history_pruning_enabled is True
    assert loaded.settings.context.history_pruning_max_tokens == 9


def test_dotted_keys_load() -> None:
    loaded = load_settings(
        {
            "context.maxContextTokens": 1_000,
            "context.historyPruning.enabled": True,
            "context": {"historyPruning.maxTokens": 5},
        }
    )
    assert loaded.problems == () and loaded.unknown_keys == ()
    assert loaded.settings.context.max_context_tokens == 1_000
    assert loaded.settings.context.history_pruning_enabled is True
    assert loaded.settings.context.history_pruning_max_tokens == 5


def test_null_and_empty_sections_give_the_defaults() -> None:
    for raw in (None, {}):
        loaded = load_settings(raw)
        assert loaded.settings == default_settings()
        assert loaded.problems == ()


def test_integral_float_is_an_integer() -> None:
    loaded = load_settings({"maxMessages": 30.0})
    assert loaded.problems == ()
    assert loaded.settings.max_messages == 30
    assert isinstance(loaded.settings.max_messages, int)


def test_fractional_age_is_a_number() -> None:
    assert load_settings({"maxAgeHours": 0.5}).settings.max_age_hours == 0.5


# -- bad values ------------------------------------------------------------------------------------


def test_wrong_type_is_reported_and_replaced_while_other_keys_apply() -> None:
    loaded = load_settings({"maxMessages": "lots", "maxTokens": 500})
    assert loaded.settings.max_messages == 50
    assert loaded.settings.max_tokens == 500
    (problem,) = loaded.problems
    assert (problem.key, problem.value, problem.default) == ("chatHistory.maxMessages", "lots", 50)
    message = problem.message()
    assert "chatHistory.maxMessages" in message and '"lots"' in message and "50" in message


def test_out_of_range_value_is_reported_and_replaced_while_other_keys_apply() -> None:
    loaded = load_settings({"context": {"trimLowWater": 1.5, "maxHistoryTurns": 3}})
    assert loaded.settings.context.trim_low_water == 1.0
    assert loaded.settings.context.max_history_turns == 3
    (problem,) = loaded.problems
    assert (problem.key, problem.value, problem.default) == (
        "chatHistory.context.trimLowWater",
        1.5,
        1.0,
    )
    message = problem.message()
    assert "chatHistory.context.trimLowWater" in message and "1.5" in message and "1.0" in message


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"maxMessages": -1}, "chatHistory.maxMessages"),
        ({"maxMessages": 2.5}, "chatHistory.maxMessages"),
        ({"maxTokens": True}, "chatHistory.maxTokens"),
        ({"maxAgeHours": -0.5}, "chatHistory.maxAgeHours"),
        ({"maxAgeHours": "720"}, "chatHistory.maxAgeHours"),
        ({"enableAutoPruning": "yes"}, "chatHistory.enableAutoPruning"),
        ({"enableAutoPruning": 1}, "chatHistory.enableAutoPruning"),
        ({"preserveSystemMessages": None}, "chatHistory.preserveSystemMessages"),
        ({"maxToolResultChars": -5}, "chatHistory.maxToolResultChars"),
        ({"context": {"maxContextTokens": -1}}, "chatHistory.context.maxContextTokens"),
        ({"context": {"compactRatio": "half"}}, "chatHistory.context.compactRatio"),
        ({"context": {"trimLowWater": 0}}, "chatHistory.context.trimLowWater"),
        ({"context": {"preset": "huge"}}, "chatHistory.context.preset"),
        ({"context": {"keepToolContextTurns": -2}}, "chatHistory.context.keepToolContextTurns"),
        ({"context.historyPruning.enabled": "on"}, "chatHistory.context.historyPruning.enabled"),
        ({"activeProvider": ""}, "chatHistory.activeProvider"),
        ({"activeProvider": 3}, "chatHistory.activeProvider"),
        ({"providers": ["openai"]}, "chatHistory.providers"),
    ],
)
def test_each_bad_value_falls_back_to_its_default(raw: dict[str, Any], key: str) -> None:
    loaded = load_settings(raw)
    assert [p.key for p in loaded.problems] == [key]
    assert loaded.problems[0].default == properties()[key]["default"]
    assert attribute(loaded.settings, key) == loaded_value(properties()[key]["default"])


def test_a_section_that_is_not_an_object_is_reported() -> None:
    loaded = load_settings(["maxMessages", 3])
    assert loaded.settings == default_settings()
    assert [p.key for p in loaded.problems] == ["chatHistory"]


def test_unknown_keys_are_listed_and_the_rest_applies() -> None:
    loaded = load_settings(
        {"maxMessages": 7, "colour": "blue", "context": {"maxTurns": 3, "preset": "unbounded"}}
    )
    assert sorted(loaded.unknown_keys) == ["chatHistory.colour", "chatHistory.context.maxTurns"]
    assert loaded.problems == ()
    assert loaded.settings.max_messages == 7
    assert loaded.settings.context.preset == "unbounded"


# -- provider aliases ------------------------------------------------------------------------------


def test_bad_provider_alias_is_dropped_with_a_problem_and_good_ones_kept() -> None:
    loaded = load_settings(
        {
            "providers": {
                "claude": {"provider": "anthropic", "model": "claude-x", "contextWindow": 200_000},
                "local": {"provider": "ollama"},
                "typo": {"provider": "antropic", "model": "m"},
                "no-kind": {"model": "m"},
                "zero": {"provider": "openai", "contextWindow": 0},
                "not-an-object": "openai",
            },
            "activeProvider": "claude",
        }
    )
    assert dict(loaded.settings.providers) == {
        "claude": ProviderAlias(provider="anthropic", model="claude-x", context_window=200_000),
        "local": ProviderAlias(provider="ollama"),
    }
    assert sorted(p.key for p in loaded.problems) == [
        "chatHistory.providers.no-kind",
        "chatHistory.providers.not-an-object",
        "chatHistory.providers.typo",
        "chatHistory.providers.zero",
    ]
    typo = next(p for p in loaded.problems if p.key.endswith(".typo"))
    assert typo.value == {"provider": "antropic", "model": "m"}
    assert "antropic" in typo.message()
    assert loaded.settings.active_provider == "claude"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"prompt": 42}, "chatHistory.context.compaction.prompt"),
        ({"prompt": ["Summarize."]}, "chatHistory.context.compaction.prompt"),
        ({"triggerRatio": 0}, "chatHistory.context.compaction.triggerRatio"),
        ({"triggerRatio": 1.5}, "chatHistory.context.compaction.triggerRatio"),
        ({"keepRecentTurns": 0}, "chatHistory.context.compaction.keepRecentTurns"),
        ({"keepRecentTurns": 2.5}, "chatHistory.context.compaction.keepRecentTurns"),
        ({"maxSummaryTokens": 99}, "chatHistory.context.compaction.maxSummaryTokens"),
        ({"enabled": "yes"}, "chatHistory.context.compaction.enabled"),
    ],
)
def test_a_bad_compaction_setting_is_reported_and_replaced(raw: dict[str, Any], key: str) -> None:
    loaded = load_settings({"context": {"compaction": raw, "maxHistoryTurns": 3}})
    assert [problem.key for problem in loaded.problems] == [key]
    assert attribute(loaded.settings, key) == properties()[key]["default"]
    assert loaded.settings.context.max_history_turns == 3  # the other keys still apply


def test_compaction_settings_load_nested_and_dotted() -> None:
    nested_ = load_settings(
        {"context": {"compaction": {"prompt": "Sum up.", "keepRecentTurns": 2}}}
    ).settings
    dotted = load_settings(
        {"context.compaction.prompt": "Sum up.", "context.compaction.keepRecentTurns": 2}
    ).settings
    assert nested_ == dotted
    assert nested_.context.compaction_prompt == "Sum up."
    assert nested_.context.compaction_keep_recent_turns == 2


# -- the settings are derived from their keys, not mapped by hand ----------------------------------


@attrs.frozen(kw_only=True)
class NewEntry:
    kind: str
    size_limit: int | None = None


@attrs.frozen(kw_only=True)
class NewSection:
    deep_new_limit: int
    some_ratio: float | None


@attrs.frozen(kw_only=True)
class NewSettings:
    top_flag: bool
    hours: float
    section: NewSection
    entries: Mapping[str, NewEntry]


def test_a_new_setting_needs_only_its_schema_entry_and_one_field() -> None:
    """What ``load_settings`` does with the checked values by key: each field is the key its name
    spells (a nested key joined by ``_``), an attrs field a section, a map of attrs entries their
    camelCase keys; numbers take their field's type. No table names any of them."""
    values = {
        "x.topFlag": True,
        "x.hours": 2,
        "x.section.deep.newLimit": 3.0,
        "x.section.someRatio": 1,
        "x.entries": {"a": {"kind": "k", "sizeLimit": 4.0}, "b": {"kind": "j"}},
    }
    built = settings_module._section(NewSettings, "x.", values)
    assert built == NewSettings(
        top_flag=True,
        hours=2.0,
        section=NewSection(deep_new_limit=3, some_ratio=1.0),
        entries={"a": NewEntry(kind="k", size_limit=4), "b": NewEntry(kind="j")},
    )
    assert isinstance(built.hours, float) and isinstance(built.section.deep_new_limit, int)
    assert settings_module.field_name("historyPruning.maxTokens") == "history_pruning_max_tokens"
    assert settings_module.setting_key("max_tool_result_chars") == "maxToolResultChars"
