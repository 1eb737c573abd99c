"""Turn segmentation and tool-call carrier detection (semantics.md, "Turns").

A turn starts at a real user message and holds every row up to the next one. Leading system rows
belong to no turn; other rows before the first real user message form turn 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Generic, TypeVar

import attrs

from chat_history.model import Message

#: User rows an agent loop writes inside a turn; they never open a new turn.
IN_TURN_USER_PREFIXES: tuple[str, ...] = ("[Tool results]", "[Tool call parse error]", "[SOP:")
#: Prefix of prompt-mode tool result rows (user role).
TOOL_RESULTS_PREFIX = "[Tool results]"

_OPEN_CALL, _CLOSE_CALL = "<tool_call>", "</tool_call>"
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([^"\\]*)"')

T = TypeVar("T", bound=Message)


def is_real_user(row: Message) -> bool:
    """A user row that opens a turn (not a prompt-mode result, parse-error or SOP row)."""
    return row.role == "user" and not row.content.startswith(IN_TURN_USER_PREFIXES)


def is_in_turn_user(row: Message) -> bool:
    """A user row written inside a turn by an agent loop."""
    return row.role == "user" and row.content.startswith(IN_TURN_USER_PREFIXES)


@attrs.frozen
class CallRef:
    """A call a carrier makes: structured calls have ids, prompt-mode calls usually do not."""

    id: str | None
    name: str


def _json_call_names(payload: object) -> list[str]:
    if not isinstance(payload, dict):
        return []
    calls = payload.get("tool_calls")
    if not isinstance(calls, list):
        return []
    names: list[str] = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        name = call.get("name")
        function = call.get("function")
        if not isinstance(name, str) and isinstance(function, dict):
            name = function.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def tool_call_blocks(content: str) -> list[str]:
    """The text of each ``<tool_call>…</tool_call>`` block, as the lazy regex
    ``<tool_call>(.*?)</tool_call>`` finds them, in linear time (that regex is quadratic on an
    unclosed ``<tool_call>`` repeated)."""
    blocks: list[str] = []
    pos = 0
    while (start := content.find(_OPEN_CALL, pos)) >= 0:
        body = start + len(_OPEN_CALL)
        end = content.find(_CLOSE_CALL, body)
        if end < 0:
            break  # unclosed: no later block can close either
        blocks.append(content[body:end])
        pos = end + len(_CLOSE_CALL)
    return blocks


def _prompt_mode_call_names(content: str) -> list[str]:
    stripped = content.strip()
    if stripped.startswith("{"):
        try:
            names = _json_call_names(json.loads(stripped))
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            names = []
        if names:
            return names
    names = []
    for block in tool_call_blocks(content):
        try:
            payload = json.loads(block.strip())
        except (ValueError, RecursionError):
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("name"), str):
            names.append(payload["name"])
        else:
            found = _NAME_IN_TEXT.search(block)
            if found:
                names.append(found.group(1))
    return names


def carrier_calls(row: Message, tools: Collection[str] | None = None) -> list[CallRef]:
    """The calls ``row`` carries; empty when it is not a tool-call carrier.

    Structured ``tool_calls`` always count (their results are matched by id). Prompt-mode calls
    (JSON ``tool_calls`` or ``<tool_call>`` blocks in the text) count only when they name a tool
    in ``tools``; with no list, any name counts.
    """
    if row.role != "assistant":
        return []
    if row.tool_calls:
        return [CallRef(call.id, call.name) for call in row.tool_calls]
    if "tool_call" not in row.content:
        return []
    names = _prompt_mode_call_names(row.content)
    if tools is not None:
        names = [name for name in names if name in tools]
    return [CallRef(None, name) for name in names]


@attrs.frozen
class Turn(Generic[T]):
    """One turn's rows in order; ``number`` 0 is the rows before the first real user message."""

    number: int
    rows: tuple[T, ...]


@attrs.frozen
class Segmented(Generic[T]):
    """Rows split by content: the leading system rows, then the turns."""

    leading_system: tuple[T, ...]
    turns: tuple[Turn[T], ...]


def segment(rows: Sequence[T]) -> Segmented[T]:
    """Split rows into the leading system run and turns, by content (not stored numbers)."""
    index = 0
    while index < len(rows) and rows[index].role == "system":
        index += 1
    leading = tuple(rows[:index])
    turns: list[Turn[T]] = []
    current: list[T] = []
    number = 0
    for row in rows[index:]:
        if row.role == "user" and is_real_user(row):
            if current:
                turns.append(Turn(number, tuple(current)))
            number += 1
            current = [row]
        else:
            current.append(row)
    if current:
        turns.append(Turn(number, tuple(current)))
    return Segmented(leading, tuple(turns))


def next_turn_number(last_turn: int, row: Message) -> int:
    """The turn number a newly appended row gets, given the conversation's last turn number."""
    return last_turn + 1 if is_real_user(row) else last_turn
