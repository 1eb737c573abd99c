"""The ``chatHistory`` section of a VS Code ``settings.json`` file, for the CLI: JSON with
comments and trailing commas, holding flat dotted keys (``"chatHistory.maxMessages": 20``), a
nested ``"chatHistory": {...}`` object, or both. Validation stays in ``settings.load_settings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat_history.settings import SECTION


class SettingsFileError(Exception):
    """A settings file that cannot be read or parsed: the path and why."""


def strip_jsonc(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments and trailing commas, strings untouched.
    Comments become spaces (newlines kept), so JSON error positions still point at the file."""
    out: list[str] = []
    i, n = 0, len(text)
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    while i < n:
        ch = text[i]
        if ch == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            pending_comma = None
            i = end + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
        else:
            if ch in "}]" and pending_comma is not None:
                out[pending_comma] = " "
            if ch == ",":
                pending_comma = len(out)
            elif not ch.isspace():
                pending_comma = None
            out.append(ch)
            i += 1
    return "".join(out)


def section_of(document: Any) -> dict[str, Any]:
    """The ``chatHistory`` section, with keys relative to it (dotted where they were flat)."""
    if not isinstance(document, dict):
        raise SettingsFileError("expected a JSON object at the top level")
    section: dict[str, Any] = {}
    nested = document.get(SECTION)
    if nested is not None:
        if not isinstance(nested, dict):
            raise SettingsFileError(f'"{SECTION}" must be an object')
        section.update(nested)
    prefix = SECTION + "."
    for key, value in document.items():
        if key.startswith(prefix):
            section[key.removeprefix(prefix)] = value
    return section


def read_settings_file(path: Path) -> dict[str, Any]:
    """The ``chatHistory`` settings of a VS Code settings.json (comments and trailing commas
    allowed), as one section."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"cannot read {path}: {exc}") from None
    try:
        document = json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
        ) from None
    try:
        return section_of(document)
    except SettingsFileError as exc:
        raise SettingsFileError(f"{path}: {exc}") from None
