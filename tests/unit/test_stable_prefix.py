"""The stable prefix (protocol.md "Version 3", "Stable prefix"; policy/prepare/steps.py): with
trimLowWater below 1, for any growing conversation and settings, every request keeps the limits
(budget, turn limit, tool context), and consecutive requests send the same rows in the same form
up to the previous request's newest turn, except on the requests where a limit forces a move,
whose count the headroom bounds."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import attrs
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rows import A, S, T, U, as_stored

from chat_history.model import Message
from chat_history.policy.budget import Route
from chat_history.policy.prepare.collapse import has_tool_exchange, turn_figures
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions
from chat_history.policy.turns import segment
from chat_history.settings import ContextSettings, default_settings

UNKNOWN = Route("anthropic", "anthropic", None, None)


@attrs.frozen
class Turn:
    prompt: int
    outputs: tuple[int, ...]
    reply: int


turn_shapes = st.builds(
    Turn,
    st.integers(1, 400),
    st.lists(st.integers(1, 1_200), max_size=3).map(tuple),
    st.integers(1, 600),
)


@st.composite
def stepped_settings(draw: st.DrawFn) -> ContextSettings:
    return attrs.evolve(
        default_settings().context,
        max_context_tokens=draw(st.integers(200, 6_000)),
        max_history_turns=draw(st.integers(1, 30)),
        keep_tool_context_turns=draw(st.integers(0, 4)),
        trim_low_water=draw(st.floats(0.3, 0.95)),
        compaction_enabled=False,
    )


def grow(shapes: list[Turn]) -> Iterator[list[Message]]:
    """The conversation as it grows, at every request: after each prompt and each tool output
    (the replies come after the requests of their turn)."""
    rows: list[Message] = [S("system " * 20)]
    for number, shape in enumerate(shapes, start=1):
        rows.append(U(f"q{number} " + "p" * shape.prompt))
        yield rows
        for index, size in enumerate(shape.outputs):
            call = f"c{number}_{index}"
            rows += [A(f"call {call}", call), T(call, "o" * size)]
            yield rows
        rows.append(A(f"a{number} " + "r" * shape.reply))


def collapse_line(newest: int, keep: int) -> int:
    """The oracle's tool-context line: the first multiple of keep + 1 at or above newest - keep."""
    return math.ceil((newest - keep) / (keep + 1)) * (keep + 1)


def sent_turns(out: Prepared) -> list[list[Message]]:
    return [list(turn.rows) for turn in segment(out.rows).turns]


def check_limits(out: Prepared, ctx: ContextSettings, keep: int) -> None:
    turns = sent_turns(out)
    note = 1 if out.trimmed is not None else 0
    real = len(turns) - note  # the context note opens the first "turn" of the body
    assert real <= max(1, ctx.max_history_turns)
    budget = ctx.max_context_tokens
    assert budget is not None
    if out.estimated_tokens > budget:
        assert real == 1  # only the newest turn is left
    with_tools = [t for t in turns[note:-1] if has_tool_exchange(t)]
    assert len(with_tools) <= keep


@settings(deadline=None, max_examples=120)
@given(st.lists(turn_shapes, min_size=1, max_size=40), stepped_settings())
# Found by a random run: at turn 8 the budget's move dropped turns 1-7, at turn 9 the turn limit's
# grid dropped only 1-4 and the budget, then judged after it, kept 5-7 (the first sent turn moved
# back). The budget is now judged before the turn limit.
@example(
    [Turn(1, (), 1)] * 9,
    attrs.evolve(
        default_settings().context,
        max_context_tokens=200,
        max_history_turns=9,
        keep_tool_context_turns=0,
        trim_low_water=0.5,
        compaction_enabled=False,
    ),
)
def test_a_growing_conversation_keeps_its_prefix_but_for_moves_the_headroom_bounds(
    shapes: list[Turn], ctx: ContextSettings
) -> None:
    keep = ctx.tool_context_turns()
    budget = ctx.max_context_tokens
    assert budget is not None
    step = max(1, budget - math.floor(budget * ctx.trim_low_water))
    turn_step = max(1, math.ceil((1 - ctx.trim_low_water) * ctx.max_history_turns))
    # the turn limit's grid: its step rounded up to a multiple of the tool-context step
    turn_grid = math.ceil(turn_step / (keep + 1)) * (keep + 1)
    previous: tuple[Prepared, int, int, int] | None = None
    before_first_newest = 0
    front_moves = back_moves = tool_moves = crowded = 0
    for rows in grow(shapes):
        stored = as_stored(rows)
        out = prepare_rows(stored, RequestOptions(settings=ctx, route=UNKNOWN))
        check_limits(out, ctx, keep)
        turns = segment(stored).turns
        newest = turns[-1].number
        line = collapse_line(newest, keep)
        first = out.trimmed.dropped_turns if out.trimmed is not None else 0
        # the position of the first sent turn: the collapsed estimates of the turns before it
        position = sum(turn_figures(t.rows).sent_tokens for t in turns[:first])
        # what the running turn and the turns that keep their tool context add
        # (counted from the previous request's first sent turn: a forced move starts there)
        start = first if previous is None else min(first, previous[1])
        excess = sum(
            sum(m.tokens for m in t.rows) for t in turns if t.number >= line and t.number > start
        )
        crowded += excess > step
        if previous is not None:
            before, before_first, before_position, running = previous
            before_line = collapse_line(before_first_newest, keep)
            prefix = before.rows[: len(before.rows) - running]
            shared = out.rows[: len(prefix)] == prefix
            tool_moves += line != before_line
            if not shared:  # a break of the prefix comes only with a move of a limit
                assert first != before_first or line != before_line
            if first > before_first and first < newest - 1:
                # forward, and not down to the newest turn alone (no limit goes below it): onto
                # a line of the budget's or the turns' grid, on a request where the tool-context
                # line moves too, unless the kept tool context alone forced it
                front_moves += 1
                assert position // step > before_position // step or (first + 1) % turn_grid == 0
                assert line != before_line or excess > step
            back_moves += first < before_first
        previous = (out, first, position, len(turns[-1].rows))
        before_first_newest = newest
    completed = segment(as_stored(rows)).turns[:-1]
    positions = sum(turn_figures(t.rows).sent_tokens for t in completed)
    assert tool_moves <= len(shapes) // (keep + 1) + 1
    # the first sent turn moves back only after the kept tool context alone forced a move
    assert back_moves <= crowded
    assert front_moves <= positions // step + len(shapes) // turn_grid + 1 + back_moves


def test_trim_low_water_1_is_version_2() -> None:
    """The grids are off at 1: a growing conversation's request slides turn by turn, as in
    version 2 (the first sent turn moves on every new turn once the turn limit is reached)."""
    ctx: Any = attrs.evolve(default_settings().context, max_history_turns=3, max_context_tokens=0)
    firsts = []
    for rows in grow([Turn(10, (), 10)] * 8):
        out = prepare_rows(as_stored(rows), RequestOptions(settings=ctx, route=UNKNOWN))
        firsts.append(out.trimmed.dropped_turns if out.trimmed is not None else 0)
    assert firsts == [0, 0, 0, 1, 2, 3, 4, 5]
    stepped = attrs.evolve(ctx, trim_low_water=0.5)
    firsts = []
    for rows in grow([Turn(10, (), 10)] * 8):
        out = prepare_rows(as_stored(rows), RequestOptions(settings=stepped, route=UNKNOWN))
        firsts.append(out.trimmed.dropped_turns if out.trimmed is not None else 0)
    assert firsts == sorted(firsts) and len(set(firsts)) < 6  # fewer moves, never back
