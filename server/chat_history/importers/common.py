"""What every reader of another tool's history shares: the session it reads out of a file, the
count of what it could not carry over (with why), JSON lines read defensively (a line that is
not JSON, too deep or not an object is counted, never fatal), and timestamps.

Readers are pure: file bytes in, sessions out; no file system, no clock."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import attrs

from chat_history.model import Message

#: JSON nested deeper than this is not a record of any tool we read (and a bomb for json.loads).
MAX_DEPTH = 200


@attrs.frozen
class Skipped:
    """What a reader left out: ``count`` of ``what``, because ``why``."""

    what: str
    why: str
    count: int


@attrs.frozen
class Session:
    """One conversation read from another tool's files."""

    source: str
    #: the tool's own id of the session (the conversation id is ``source:`` + it)
    session_id: str
    #: the project folder the tool recorded (its cwd), as the tool wrote it; None: not recorded
    folder: str | None
    title: str | None
    messages: tuple[Message, ...]
    skipped: tuple[Skipped, ...]
    #: a tool whose transcript is a tree (Claude Code's rewinds): ``parents[i]`` the index of the
    #: message that message i follows (lower; None: a first row), ``active`` the index of the
    #: tool's last leaf. None: a line, each message after the one before it.
    parents: tuple[int | None, ...] | None = None
    active: int | None = None

    @property
    def conversation_id(self) -> str:
        return f"{self.source}:{self.session_id}"


class Tally:
    """Counts of what was skipped, by (what, why)."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def skip(self, what: str, why: str, count: int = 1) -> None:
        self._counts[(what, why)] += count

    def items(self) -> tuple[Skipped, ...]:
        return tuple(Skipped(what, why, n) for (what, why), n in sorted(self._counts.items()))


def _depth(text: str) -> int:
    """The deepest nesting of brackets in ``text`` outside strings (linear, no parse)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def json_value(text: str) -> Any:
    """``text`` parsed, or ValueError (not JSON, or nested deeper than MAX_DEPTH)."""
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError("not JSON") from exc


def json_lines(data: bytes, tally: Tally) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of a JSONL file that holds a JSON object, with its number (from 1); a line that
    is not valid UTF-8, not JSON, too deep or not an object is counted in ``tally``."""
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            tally.skip("line", "not valid UTF-8")
            continue
        try:
            value = json_value(text)
        except ValueError as exc:
            tally.skip("line", str(exc))
            continue
        if not isinstance(value, dict):
            tally.skip("line", "not a JSON object")
            continue
        yield number, value


def timestamp_ms(value: Any) -> int | None:
    """An ISO 8601 time (``2026-06-15T10:00:01.000Z``) or epoch milliseconds as epoch ms."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        ms = int(value if value > 10**11 else value * 1000)
        return ms if 0 <= ms < 2**53 else None
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return int(parsed.timestamp() * 1000)


def text_of(blocks: Any) -> str:
    """The text of a string, or of a list of content blocks (``text``/``input_text``/
    ``output_text``), joined by blank lines."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    parts = [
        block.get("text", "")
        for block in blocks
        if isinstance(block, dict)
        and block.get("type") in {"text", "input_text", "output_text"}
        and isinstance(block.get("text"), str)
    ]
    return "\n\n".join(part for part in parts if part)


def first_line_title(text: str, limit: int = 80) -> str | None:
    """A title from the first line of a prompt (None when it has no text)."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not line:
        return None
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
