"""The stable prefix (protocol.md "Version 3", "Stable prefix"): with ``trimLowWater`` below 1,
``prepare``'s three moving boundaries move in steps on grids that stored figures define, so that
consecutive requests of a growing conversation send the same rows in the same form up to their
newest turns, and a provider's prompt cache serves that prefix. Pure arithmetic; no memory: every
process, and the same one after a restart, picks the same boundaries from the same rows.

- **Tool context** (step 3): completed turns whose stored turn number is below a multiple of
  ``keepToolContextTurns + 1`` are collapsed: the line is the first multiple at or above
  ``newest - keepToolContextTurns``, so at most ``keepToolContextTurns`` completed turns keep
  their tool rows, and a move collapses all of them at once. (A move rewrites everything after
  the first newly collapsed turn; moving by one turn would rewrite the kept whole turns on every
  turn, so the step is the whole allowance.)
- **Turn limit** (step 4): the first sent turn number is a multiple of
  ``ceil((1 - trimLowWater) * maxHistoryTurns)`` (rounded up to a multiple of the tool-context
  step), the first one at or above ``line + keepToolContextTurns - maxHistoryTurns + 1`` for the
  tool-context line: never more than ``maxHistoryTurns`` turns, a move takes away at least that
  step, and it comes on a request where the tool-context line moves anyway.
- **Token budget** (step 5): every turn has a *position*, the sum of the collapsed estimates
  (``TurnFigures.sent_tokens``) of the uncovered turns before it, counted from the oldest stored
  uncovered turn. Over the budget, the oldest turns are dropped up to the next line of the grid
  ``budget - floor(budget * trimLowWater)`` while the *settled* part of the request (all but
  the turns above the tool-context line and the running turn, so it changes only when that line
  moves) is over ``budget * trimLowWater``, or the whole request over the budget. A move takes
  away a grid step (less the one turn that straddles a line), leaving that much headroom; the
  first sent turn never moves back as the conversation grows (the settled part only grows),
  but for a request that the kept tool context alone pushes over the budget; and the same
  position answers the same line however the request was read.

Turn numbers are the stored ones (never renumbered; rows that are not stored rows are numbered
by their order), so deleting old turns does not move the first two grids. Positions count from
the oldest stored uncovered turn: storage retention that deletes turns the request no longer
sends shifts the budget's grid, which may cost one extra move."""

from __future__ import annotations

import math

import attrs


@attrs.frozen
class Steps:
    """The grids of one request: turn numbers for the turn limit and the tool context, positions
    (raw tokens) for the budget (0: no budget)."""

    turn_step: int
    tool_step: int
    token_step: int


def steps_of(low_water: float, *, max_turns: int, keep_tools: int, budget: int) -> Steps | None:
    """The grids for ``trimLowWater`` = ``low_water``; None at 1 (version 2's sliding limits)."""
    if low_water >= 1:
        return None
    headroom = 1 - low_water
    return Steps(
        turn_step=max(1, math.ceil(headroom * max(1, max_turns))),
        tool_step=keep_tools + 1,
        token_step=max(1, budget - math.floor(budget * low_water)) if budget > 0 else 0,
    )


def line_at_or_above(value: int, step: int) -> int:
    """The smallest multiple of ``step`` that is at least ``value``."""
    return -(-value // step) * step


def collapse_line(steps: Steps, newest: int, keep_tools: int) -> int:
    """Completed turns numbered below this are collapsed (``newest``: the running turn's number)."""
    return line_at_or_above(newest - keep_tools, steps.tool_step)


def first_kept_turn(steps: Steps, collapse: int, keep_tools: int, max_turns: int) -> int:
    """Turns numbered below this are dropped by the turn limit. It is worked out from the
    tool-context line ``collapse`` (the running turn's number is at most ``collapse +
    keep_tools``) on a grid whose step is a multiple of that line's, so the turn limit moves
    only on a request where the tool-context line moves too (one break of the prefix, not two)."""
    step = line_at_or_above(steps.turn_step, steps.tool_step)
    return line_at_or_above(collapse + keep_tools - max(1, max_turns) + 1, step)


def next_line(position: int, step: int) -> int:
    """The first line of the budget grid after ``position``."""
    return (position // step + 1) * step
