"""Recording rules for ``append`` (semantics.md): turn numbers, tool rows answering a pending call
of their turn, and the head ⅔ / tail ⅓ cut of an over-long tool result."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.tokens import find_image_markers
from chat_history.policy.turns import is_real_user, next_turn_number


def truncation_marker(removed: int) -> str:
    """What replaces the middle of a tool result cut by ``maxToolResultChars``: how many characters
    went."""
    return f"\n\n[... {removed} characters truncated ...]\n\n"


def truncate_tool_result(content: str, limit: int) -> str:
    """Cut ``content`` to the first ⅔ and last ⅓ of ``limit`` characters with a marker between;
    a cut never falls inside an ``[IMAGE:…]`` marker (the marker is left out whole instead)."""
    if limit <= 0 or len(content) <= limit:
        return content
    head_end = (2 * limit) // 3
    tail_start = len(content) - (limit - head_end)
    for marker in find_image_markers(content):
        if marker.start < head_end < marker.end:
            head_end = marker.start
        if marker.start < tail_start < marker.end:
            tail_start = marker.end
    removed = tail_start - head_end
    return content[:head_end] + truncation_marker(removed) + content[tail_start:]


@attrs.frozen
class PlannedRow:
    """A message of an append and the turn it is stored with."""

    message: Message
    turn: int


def pending_call_ids(turn_rows: Sequence[Message]) -> set[str]:
    """Call ids of the turn's carriers that no tool row of the turn answered yet."""
    pending: set[str] = set()
    for row in turn_rows:
        if row.role == "assistant":
            pending.update(call.id for call in row.tool_calls)
        elif row.role == "tool" and row.tool_call_id is not None:
            pending.discard(row.tool_call_id)
    return pending


def plan_append(
    *,
    last_turn: int,
    current_turn_rows: Sequence[Message],
    messages: Sequence[Message],
    max_tool_result_chars: int,
    first_index: int = 0,
) -> list[PlannedRow]:
    """Number the new rows' turns, check every tool row answers a pending call of its turn, and
    cut over-long tool results. Raises InvalidParams naming the first offending row as
    ``messages[i]``, counting from ``first_index`` (an import names its rows among all it was
    given, some of which were already stored)."""
    pending = pending_call_ids(current_turn_rows)
    turn = last_turn
    planned: list[PlannedRow] = []
    for index, message in enumerate(messages):
        turn = next_turn_number(turn, message)
        if is_real_user(message):
            pending = set()
        if message.role == "assistant":
            pending.update(call.id for call in message.tool_calls)
        elif message.role == "tool":
            call_id = message.tool_call_id
            if call_id not in pending:
                raise InvalidParams(
                    f"messages[{first_index + index}].tool_call_id",
                    f"answers no pending tool call of its turn ({len(pending)} pending: a tool "
                    "row follows the assistant row that called it)",
                )
            pending.discard(call_id)
            cut = truncate_tool_result(message.content, max_tool_result_chars)
            if cut is not message.content:
                message = attrs.evolve(message, content=cut)
        planned.append(PlannedRow(message, turn))
    return planned
