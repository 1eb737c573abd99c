"""Tool context collapse, turn by turn (semantics.md "Request-time preparation" step 3): the
collapsed exchange row, which turns carry a tool exchange, a turn collapsed, and the figures of
a turn (``TurnFigures``: what it holds and what it would send) and of the smallest request."""

from __future__ import annotations

import operator
from collections.abc import Collection, Sequence

import attrs

from chat_history.model import Message
from chat_history.policy.tokens import row_tokens
from chat_history.policy.turns import (
    TOOL_RESULTS_PREFIX,
    carrier_calls,
    is_in_turn_user,
    is_real_user,
)

#: The assistant row a collapsed turn that no reply closed is sent with.
COLLAPSED_EXCHANGE = "[Tool exchange: {n} tool call(s) — results collapsed]"


def collapsed_exchange_row(calls: int) -> Message:
    """The assistant row standing in for a collapsed tool exchange of ``calls`` calls."""
    return Message(role="assistant", content=COLLAPSED_EXCHANGE.format(n=calls))


def has_tool_exchange(rows: Sequence[Message], tools: Collection[str] | None = None) -> bool:
    """Whether a turn holds a carrier, a tool row or an agent-loop user row."""
    for row in rows:  # a loop, not any(): this runs for every turn of every request
        role = row.role
        if role == "tool" or (role == "user" and is_in_turn_user(row)):
            return True
        if role == "assistant" and carrier_calls(row, tools):
            return True
    return False


def _exchange_calls(rows: Sequence[Message], tools: Collection[str] | None) -> int:
    calls = sum(len(carrier_calls(row, tools)) for row in rows)
    if calls:
        return calls
    results = sum(
        1 for row in rows if row.role == "tool" or row.content.startswith(TOOL_RESULTS_PREFIX)
    )
    return max(1, results)


def collapse_turn(
    rows: Sequence[Message], tools: Collection[str] | None = None
) -> tuple[tuple[Message, ...], int]:
    """A completed turn as step 3 sends it, and how many of its rows are left out.

    A turn with a tool exchange keeps its prompt, its ``system`` rows (in place) and its closing
    reply (its last non-system row, when that is an assistant row that is no carrier). A turn
    that no reply closed gets one summary assistant row where its exchange began instead, so the
    prompt is never followed by two assistant rows. A text-only turn comes back unchanged."""
    if not has_tool_exchange(rows, tools):
        return tuple(rows), 0
    prompt = rows[0] if rows and is_real_user(rows[0]) else None
    non_system = [row for row in rows if row.role != "system"]
    last = non_system[-1] if non_system else None
    closing = None
    if last is not None and last.role == "assistant" and not carrier_calls(last, tools):
        closing = last
    kept: list[Message] = []
    removed = 0
    for row in rows:
        if row is prompt or row is closing or row.role == "system":
            kept.append(row)
            continue
        if removed == 0 and closing is None:
            kept.append(collapsed_exchange_row(_exchange_calls(rows, tools)))
        removed += 1
    return tuple(kept), removed


@attrs.frozen
class TurnFigures:
    """Totals of completed turns as a request sends them collapsed (any prompt-mode call name
    counting): what ``prepare_rows`` must still count for turns left out of its rows. The
    fields add up, so totals over a range of turns are differences of running sums."""

    turns: int = 0
    #: stored non-system rows and their stored estimate (checked against the store's totals)
    spoken_rows: int = 0
    spoken_tokens: int = 0
    #: stored non-system rows the collapse keeps
    kept_rows: int = 0
    #: the non-system estimate after the collapse, its summary row included
    sent_tokens: int = 0
    collapsed_rows: int = 0
    collapsed_turns: int = 0
    #: turns with a prompt-mode call, whose collapse depends on the request's tool names
    tool_dependent: int = 0

    def as_tuple(self) -> tuple[int, ...]:
        """The figures in their fixed order: how the store's columns hold them, and how two are
        added."""
        values: tuple[int, ...] = _FIGURE_VALUES(self)
        return values

    def __add__(self, other: TurnFigures) -> TurnFigures:
        return TurnFigures(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))


_FIGURE_VALUES = operator.attrgetter(*(field.name for field in attrs.fields(TurnFigures)))


def turn_figures(rows: Sequence[Message]) -> TurnFigures:
    """The figures of one completed turn; its system rows do not count (they are always sent)."""
    spoken = [row for row in rows if row.role != "system"]
    if not spoken:
        return TurnFigures()
    if not has_tool_exchange(spoken):  # sent as it is (the common case: a question, an answer)
        tokens = sum(row_tokens(row) for row in spoken)
        return TurnFigures(1, len(spoken), tokens, len(spoken), tokens, 0, 0, 0)
    sent, removed = collapse_turn(rows)
    kept = [row for row in sent if row.role != "system"]
    synthetic = len(kept) - (len(spoken) - removed)
    prompt_mode = any(
        row.role == "assistant" and not row.tool_calls and carrier_calls(row) for row in spoken
    )
    return TurnFigures(
        turns=1,
        spoken_rows=len(spoken),
        spoken_tokens=sum(row_tokens(row) for row in spoken),
        kept_rows=len(kept) - synthetic,
        sent_tokens=sum(row_tokens(row) for row in kept),
        collapsed_rows=removed,
        collapsed_turns=1 if removed else 0,
        tool_dependent=1 if prompt_mode else 0,
    )


def request_floor(rows: Sequence[Message]) -> int:
    """A lower bound of a turn's non-system estimate in any request, collapsed or not, whatever
    the tool names: all of it without a tool exchange; else its prompt, plus its closing reply or,
    when the last row may be collapsed away, the smallest collapse summary row."""
    spoken = [row for row in rows if row.role != "system"]
    if not has_tool_exchange(spoken):  # any name counts: no exchange here, none with fewer names
        total = 0
        for row in spoken:  # a loop, not sum(): this runs for every turn a request reads
            total += row_tokens(row)
        return total
    prompt = spoken[0] if is_real_user(spoken[0]) else None
    floor = row_tokens(prompt) if prompt is not None else 0
    last = spoken[-1]
    if last is not prompt:
        closing = last.role == "assistant" and not carrier_calls(last)
        floor += row_tokens(last) if closing else min(row_tokens(last), _SMALLEST_SUMMARY_TOKENS)
    return floor


_SMALLEST_SUMMARY_TOKENS = row_tokens(collapsed_exchange_row(1))
