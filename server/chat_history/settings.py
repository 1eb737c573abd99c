"""Typed settings of the ``chatHistory`` section, with defaults and validation taken from
``settings.schema.json`` (the one list of keys, defaults and bounds; settings.md)."""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal

import attrs

from chat_history.errors import REDACTED, is_secret_key, shown

SECTION = "chatHistory"
PRESET_TOOL_CONTEXT_TURNS = {"default": 2, "localModel": 1, "unbounded": 8}

Preset = Literal["default", "localModel", "unbounded"]
PromptCache = Literal["auto", "off"]


def empty_object(value: Any) -> Any:
    """``[]`` where an object is expected means ``{}``: Lua clients (Neovim) encode an empty
    table as ``[]``. A non-empty array is left as is, to be refused by name."""
    return {} if isinstance(value, list) and not value else value


@cache
def schema() -> dict[str, Any]:
    """The ``contributes.configuration`` block: the wheel's copy, else the repository's (an
    editable install). A plain path, not importlib.resources, which costs ~25 ms at startup."""
    here = Path(__file__).resolve().parent
    packaged = here / "settings.schema.json"
    source = packaged if packaged.is_file() else here.parents[1] / "settings.schema.json"
    loaded: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
    return loaded


def properties() -> dict[str, dict[str, Any]]:
    """The settings schema's properties, by full key (``chatHistory.maxMessages``)."""
    props: dict[str, dict[str, Any]] = schema()["properties"]
    return props


def _provider_kinds() -> tuple[str, ...]:
    alias = properties()[f"{SECTION}.providers"]["additionalProperties"]
    return tuple(alias["properties"]["provider"]["enum"])


#: The provider kinds, in the schema's order: the ``provider`` enum of an alias in
#: settings.schema.json, the one list (``providers.registry`` has one formatter per kind).
PROVIDER_KINDS: tuple[str, ...] = _provider_kinds()


@attrs.frozen(kw_only=True)
class ProviderAlias:
    """``chatHistory.providers.<name>``: a name for a provider kind with its model and window,
    and where its requests go (endpoint, state scope: provider state stays valid only there)."""

    #: the provider kind whose request shape the alias uses (one of PROVIDER_KINDS)
    provider: str
    #: the model requests go to when they name none
    model: str | None = None
    #: the model's context window in tokens (None: unknown)
    context_window: int | None = None
    #: the base URL requests go to (None: the kind's public API; policy.origins)
    endpoint: str | None = None
    #: an opaque label of the account or key requests are sent with (None: none)
    state_scope: str | None = None


@attrs.frozen(kw_only=True)
class ContextSettings:
    """``chatHistory.context.*`` (settings.md "Context"): how ``prepare`` fits a request."""

    #: the request budget in tokens (0: no proactive trimming; None: 32,000 or the ratio)
    max_context_tokens: int | None
    #: budget = the model's window × this (None, or outside (0, 1]: unset)
    compact_ratio: float | None
    #: ``historyPruning.enabled`` / ``.maxTokens``: a ceiling that pulls the budget down
    history_pruning_enabled: bool
    history_pruning_max_tokens: int
    #: the whole-turn limit of a request (0: only the newest turn)
    max_history_turns: int
    #: completed turns whose tool rows are still sent (None: the preset's value)
    keep_tool_context_turns: int | None
    #: a trim the budget forces goes down to budget × this (prompt-cache headroom)
    trim_low_water: float
    #: ``default``, ``localModel`` or ``unbounded``: keepToolContextTurns 2, 1 or 8 when null
    preset: Preset
    #: prompt-cache breakpoints in Anthropic and Bedrock bodies (protocol.md "Version 3")
    prompt_cache: PromptCache
    #: compaction proposals (settings.md "Compaction"; semantics.md "When compaction is proposed")
    compaction_enabled: bool
    compaction_trigger_ratio: float
    compaction_keep_recent_turns: int
    compaction_max_summary_tokens: int
    compaction_prompt: str | None

    def tool_context_turns(self) -> int:
        """``keepToolContextTurns``, or the preset's value when it is null."""
        if self.keep_tool_context_turns is not None:
            return self.keep_tool_context_turns
        return PRESET_TOOL_CONTEXT_TURNS[self.preset]


@attrs.frozen(kw_only=True)
class Settings:
    """The ``chatHistory`` section in force (settings.md; keys, defaults and bounds in
    settings.schema.json)."""

    #: storage retention runs on every read and write (else only when asked: ``prune``)
    enable_auto_pruning: bool
    #: retention's three rules, in whole turns: older than this many hours (0: off), more than
    #: this many messages (0: only the newest turn), more than this many tokens (0: off)
    max_age_hours: float
    max_messages: int
    max_tokens: int
    #: system rows are never deleted by retention
    preserve_system_messages: bool
    #: a longer tool result is cut when recorded, head ⅔ and tail ⅓ (0: no limit)
    max_tool_result_chars: int
    #: ``chatHistory.context.*``
    context: ContextSettings
    #: the provider kind or alias a request that names none goes to
    active_provider: str
    #: ``chatHistory.providers``: alias name → alias
    providers: Mapping[str, ProviderAlias]
    #: "folder" or "repository" (protocol.md "Version 3" → Workspace identity)
    workspace_identity: str = "folder"


def shown_setting(key: str, value: Any) -> str:
    """A setting's value for a warning: cut, and never a secret (an alias's ``apiKey``)."""
    return REDACTED if is_secret_key(key) and value is not None else shown(value)


@attrs.frozen
class SettingProblem:
    """A value that was replaced by its default: reported once through window/showMessage."""

    key: str
    value: Any
    default: Any
    why: str

    def message(self) -> str:
        """The warning shown for the bad value: the key, the value, why, and the default used
        instead."""
        return (
            f"Invalid setting {self.key} = {shown_setting(self.key, self.value)}: {self.why}; "
            f"using the default {shown_setting(self.key, self.default)}."
        )


@attrs.frozen
class LoadedSettings:
    """Settings read from a client or a file: the settings in force, the values replaced by
    their defaults, and the keys nobody knows."""

    settings: Settings
    problems: tuple[SettingProblem, ...]
    unknown_keys: tuple[str, ...]


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "null":
        return value is None
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if expected == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if expected == "string":
        return isinstance(value, str)
    if expected == "object":
        return isinstance(value, dict)
    raise ValueError(f"settings.schema.json uses an unsupported type {expected!r}")


def check_value(value: Any, spec: Mapping[str, Any]) -> str | None:
    """Why ``value`` does not satisfy the schema fragment ``spec``, or None when it does.

    Supports the subset the schema uses: type, enum, minimum, maximum, exclusiveMinimum,
    minLength, and objects with required/properties/additionalProperties."""
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if not any(_type_ok(value, t) for t in types):
        return f"expected {' or '.join(types)}"
    if value is None:
        return None
    if "enum" in spec and value not in spec["enum"]:
        return "expected one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in spec and value < spec["minimum"]:
            return f"must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"must be at most {spec['maximum']}"
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            return f"must be greater than {spec['exclusiveMinimum']}"
    if isinstance(value, str) and len(value) < spec.get("minLength", 0):
        return f"must have at least {spec['minLength']} character(s)"
    if isinstance(value, dict):
        for required in spec.get("required", []):
            if required not in value:
                return f"missing {required!r}"
        for key, item in value.items():
            sub = spec.get("properties", {}).get(key) or spec.get("additionalProperties")
            if sub is None:
                continue
            why = check_value(item, sub)
            if why is not None:
                return f"{key}: {why}"
    return None


def _flatten(
    raw: Mapping[str, Any],
    prefix: str,
    known: Mapping[str, Any],
    out: dict[str, Any],
    unknown: list[str],
    problems: list[SettingProblem],
) -> None:
    for key, value in raw.items():
        full = f"{prefix}.{key}"
        if full in known:
            out[full] = value
        elif any(k.startswith(full + ".") for k in known):  # a section, like `context`
            value = empty_object(value)
            if isinstance(value, dict):
                _flatten(value, full, known, out, unknown, problems)
            else:
                problems.append(
                    SettingProblem(
                        full, value, {}, "expected an object (every key in it keeps its default)"
                    )
                )
        else:
            unknown.append(full)


def load_settings(raw: Any) -> LoadedSettings:
    """Settings from a nested (or dotted) ``chatHistory`` section; bad values fall back to their
    defaults and are reported, unknown keys are listed, the rest still applies."""
    props = properties()
    flat: dict[str, Any] = {}
    unknown: list[str] = []
    problems: list[SettingProblem] = []
    raw = empty_object(raw)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(SettingProblem(SECTION, raw, {}, "expected an object"))
        raw = {}
    _flatten(raw, SECTION, props, flat, unknown, problems)
    values: dict[str, Any] = {}
    for key, spec in props.items():
        default = spec.get("default")
        if key not in flat:
            values[key] = default
            continue
        value = flat[key]
        if "object" in (spec["type"] if isinstance(spec["type"], list) else [spec["type"]]):
            value = empty_object(value)
        if key == f"{SECTION}.providers" and isinstance(value, dict):
            values[key] = _load_aliases(value, spec, problems)
            continue
        why = check_value(value, spec)
        values[key] = value if why is None else default
        if why is not None:
            problems.append(SettingProblem(key, value, default, why))
    # Derived from the classes: a field is the key its name spells (``field_name``), a field of
    # an attrs class is a section; adding a setting is a schema entry plus one field.
    built: Settings = _section(Settings, f"{SECTION}.", values)
    return LoadedSettings(built, tuple(problems), tuple(unknown))


def _load_aliases(
    value: dict[str, Any], spec: Mapping[str, Any], problems: list[SettingProblem]
) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for alias, entry in value.items():
        entry = empty_object(entry)
        why = check_value(entry, spec["additionalProperties"])
        if why is None:
            kept[alias] = entry
            continue
        key = f"{SECTION}.providers.{alias}"
        problems.append(SettingProblem(key, entry, None, why + " (alias ignored)"))
    return kept


def field_name(relative_key: str) -> str:
    """The field a schema key lands in, relative to its section (``historyPruning.maxTokens``
    → ``history_pruning_max_tokens``): the one rule from keys to fields."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", relative_key.replace(".", "_")).lower()


def setting_key(field: str) -> str:
    """A field's key in its section (``max_tool_result_chars`` → ``maxToolResultChars``)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field)


def _section(cls: type, prefix: str, v: Mapping[str, Any]) -> Any:
    keys = {field_name(key.removeprefix(prefix)): key for key in v if key.startswith(prefix)}
    values: dict[str, Any] = {}
    for field in attrs.fields(attrs.resolve_types(cls)):
        kind = field.type
        if attrs.has(kind):
            values[field.name] = _section(kind, f"{prefix}{setting_key(field.name)}.", v)
            continue
        value = v[keys[field.name]]
        entry = typing.get_args(kind)[-1] if typing.get_origin(kind) is Mapping else None
        if entry is not None and attrs.has(entry):  # a map of named entries (``providers``)
            values[field.name] = {name: _entry(entry, item) for name, item in value.items()}
        else:
            values[field.name] = _typed(value, kind)
    return cls(**values)


def _entry(cls: type, entry: Mapping[str, Any]) -> Any:
    """One named entry of a map setting (a provider alias), its keys camelCased field names."""
    fields = attrs.fields(attrs.resolve_types(cls))
    named = {
        f.name: _typed(entry[setting_key(f.name)], f.type)
        for f in fields
        if setting_key(f.name) in entry
    }
    return cls(**named)


def _typed(value: Any, kind: Any) -> Any:
    """A checked JSON value as its field's type has it: numbers of a float field as floats,
    of an int field (an integral float) as ints."""
    if value is None:
        return None
    if kind is float or float in typing.get_args(kind):
        return float(value)
    if kind is int or int in typing.get_args(kind):
        return int(value)
    return value


def default_settings() -> Settings:
    """Every setting at its schema default."""
    return load_settings({}).settings
