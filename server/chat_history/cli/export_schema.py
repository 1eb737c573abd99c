"""The export format's JSON Schema (``export.schema.json`` beside this module: the format's
published contract, versioned with it) and the check of one line against it: the import reads
no line the schema refuses, and every line the export writes is valid against it (a test).

The check is a small interpreter of the keywords the schema uses (``type``, ``const``,
``enum``, ``required``, ``properties``, ``additionalProperties: false``, ``items``, ``$ref``,
``minLength``, ``minimum``, ``pattern``, ``oneOf``, ``not``): ``jsonschema`` takes ~460 µs a
line, seven times what the rest of an import's reading costs; this one agrees with it on every
line (a hypothesis property in the tests) at a fraction of that. A keyword it does not know is
refused when the schema loads, so the schema cannot outgrow it unnoticed.

The error names the line's field by its path in the file and says the rule, never the value."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from chat_history.errors import InvalidParams

SCHEMA_PATH = Path(__file__).with_name("export.schema.json")
#: Keywords that check nothing (annotations, and the message of a ``oneOf``: ``x-why``).
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "title", "description", "contentEncoding", "x-format-version"}
)
KNOWN = ANNOTATIONS | {
    "type", "const", "enum", "required", "properties", "additionalProperties", "items",
    "$ref", "minLength", "minimum", "pattern", "oneOf", "not", "x-why",
}  # fmt: skip
_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": int | float,
    "null": type(None),
    "boolean": bool,
}


class Refused(Exception):
    """Where (path parts) a value breaks the schema, and the rule it breaks."""

    def __init__(self, path: tuple[str | int, ...], why: str) -> None:
        super().__init__(why)
        self.path = path
        self.why = why


@cache
def schema() -> dict[str, Any]:
    """The export format's schema document, each of its keywords known to the checker."""
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    _known(loaded)
    return loaded


def _known(node: Any) -> None:
    if isinstance(node, dict):
        unknown = set(node) - KNOWN
        if unknown:
            raise ValueError(f"export.schema.json uses keywords the checker lacks: {unknown}")
        for key, value in node.items():
            if key in {"properties", "$defs"}:
                for inner in value.values():
                    _known(inner)
            elif key in {"items", "not", "additionalProperties"}:
                _known(value)
            elif key == "oneOf":
                for inner in value:
                    _known(inner)


Check = Callable[[Any, tuple[str | int, ...]], None]


def check_line(line: dict[str, Any]) -> None:
    """InvalidParams naming the first field of ``line`` the schema refuses."""
    try:
        _line_check()(line, ())
    except Refused as exc:
        raise InvalidParams(_path(exc.path), exc.why) from None


@cache
def _line_check() -> Check:
    return _compile(schema(), {})


def _path(parts: tuple[str | int, ...]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in {"integer", "number"}:
        return False
    return isinstance(value, _TYPES[name])


def _compile(node: dict[str, Any], refs: dict[str, Check]) -> Check:
    """One function that checks a value against ``node`` (each keyword a step, in the order
    that names the most useful field first); ``refs``: the definitions compiled so far."""
    steps: list[Check] = []
    if "$ref" in node:
        steps.append(_ref(node["$ref"].removeprefix("#/$defs/"), refs))
    if "oneOf" in node:
        steps.append(_one_of(node, [_compile(b, refs) for b in node["oneOf"]]))
    steps.extend(_scalar_steps(node))
    if "items" in node:
        steps.append(_items(_compile(node["items"], refs)))
    if "required" in node or "properties" in node:
        steps.append(
            _object(node, {k: _compile(v, refs) for k, v in node.get("properties", {}).items()})
        )
    if "not" in node:
        steps.append(
            _not(
                _compile(node["not"], refs), node.get("x-why", "has a field that excludes another")
            )
        )

    def check(value: Any, path: tuple[str | int, ...]) -> None:
        for step in steps:
            step(value, path)

    return check


def _ref(name: str, refs: dict[str, Check]) -> Check:
    def check(value: Any, path: tuple[str | int, ...]) -> None:
        if name not in refs:
            refs[name] = _compile(schema()["$defs"][name], refs)
        refs[name](value, path)

    return check


def _scalar_steps(node: dict[str, Any]) -> list[Check]:
    steps: list[Check] = []
    if "type" in node:
        names = [node["type"]] if isinstance(node["type"], str) else list(node["type"])
        kinds = tuple(_TYPES[n] for n in names)
        numeric = bool({"integer", "number"} & set(names))

        def typed(value: Any, path: tuple[str | int, ...]) -> None:
            if not isinstance(value, kinds) or (
                isinstance(value, bool) and numeric and "boolean" not in names
            ):
                raise Refused(path, "expected " + " or ".join(names))

        steps.append(typed)
    if "const" in node or "enum" in node:
        allowed = [node["const"]] if "const" in node else list(node["enum"])
        why = "must be " + " or ".join(json.dumps(a) for a in allowed)

        def one_of_values(value: Any, path: tuple[str | int, ...]) -> None:
            if not any(value == a and type(value) is type(a) for a in allowed):
                raise Refused(path, why)

        steps.append(one_of_values)
    shortest, pattern = node.get("minLength", 0), node.get("pattern")
    if shortest or pattern:
        compiled = re.compile(pattern) if pattern else None

        def text(value: Any, path: tuple[str | int, ...]) -> None:
            if isinstance(value, str):
                if len(value) < shortest:
                    raise Refused(path, "must be a non-empty string")
                if compiled is not None and not compiled.search(value):
                    raise Refused(path, f"must match {pattern}")

        steps.append(text)
    if "minimum" in node:
        low = node["minimum"]

        def least(value: Any, path: tuple[str | int, ...]) -> None:
            if _is(value, "number") and value < low:
                raise Refused(path, f"must be at least {low}")

        steps.append(least)
    return steps


def _items(inner: Check) -> Check:
    def check(value: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(value, list):
            for index, item in enumerate(value):
                inner(item, (*path, index))

    return check


def _object(node: dict[str, Any], properties: dict[str, Check]) -> Check:
    required = tuple(node.get("required", ()))
    closed = node.get("additionalProperties") is False
    names = frozenset(properties)

    def check(value: Any, path: tuple[str | int, ...]) -> None:
        if not isinstance(value, dict):
            return
        missing = [name for name in required if name not in value]
        if missing:
            raise Refused(path, f"needs {', '.join(missing)}")
        if closed and not value.keys() <= names:
            raise Refused(path, "has a field the export format does not define")
        for name, inner in properties.items():
            if name in value:
                inner(value[name], (*path, name))

    return check


def _not(inner: Check, why: str) -> Check:
    def check(value: Any, path: tuple[str | int, ...]) -> None:
        if _passes(inner, value):
            raise Refused(path, why)

    return check


def _one_of(node: dict[str, Any], branches: list[Check]) -> Check:
    """Exactly one branch. A line's kind is its ``type``: the branch of that kind says why."""
    why = node.get("x-why")
    kinds = [_kind_of(b) for b in node["oneOf"]]

    def check(value: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(value, dict) and None not in kinds:
            if value.get("type") not in kinds:
                raise Refused(
                    (*path, "type"), "must be " + " or ".join(json.dumps(k) for k in kinds)
                )
            branches[kinds.index(value["type"])](value, path)
            return
        passed = sum(1 for branch in branches if _passes(branch, value))
        if passed != 1:
            raise Refused(path, why or "does not match exactly one kind")

    return check


def _kind_of(branch: dict[str, Any]) -> str | None:
    """The ``type`` const a branch (a ``$ref`` to a line kind) requires, None when none."""
    target = schema()["$defs"].get(branch.get("$ref", "").removeprefix("#/$defs/"), branch)
    const = target.get("properties", {}).get("type", {}).get("const")
    return const if isinstance(const, str) else None


def _passes(check: Check, value: Any) -> bool:
    try:
        check(value, ())
    except Refused:
        return False
    return True
