"""The read plan of ``prepare``: how far back to read a conversation, newest first, and when the
figures of the turns left unread cannot stand in for them (then every row is read). Pure: the
rows come in as an iterable and the figures through a lookup the caller gives; no I/O here.

A request reads turn by turn, newest first, until the turns left are ones it drops: past the turn
limit, or past the budget by a lower bound of the turns read (then the budget step drops them).
Never fewer than keepToolContextTurns + 1 turns, so every turn left out is collapsed like the
figures assume. The turns left out are counted by their recorded figures in two groups: those
the turn limit drops and those the budget drops.

With a summary that covers turns (semantics.md "Version 2"), the read stops at its coverage: the
covered turns are counted by their figures too (``compactedTurns``), never read. A compaction
proposal, when one is due, needs the oldest uncovered turns as rows: ``read_head`` reads them,
oldest first, no further than a proposal can hold."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import attrs

from chat_history.model import StoredMessage
from chat_history.policy.budget import Route, effective_budget
from chat_history.policy.calibration import Calibration
from chat_history.policy.prepare.collapse import TurnFigures
from chat_history.policy.prepare.steps import collapse_line, first_kept_turn, steps_of
from chat_history.policy.prepare.window import OmittedTurns, turn_floor
from chat_history.policy.turns import is_real_user
from chat_history.settings import ContextSettings

#: The figures of turns ``first``..``last`` summed, or None when they were not recorded.
FigureLookup = Callable[[int, int], "tuple[int, ...] | None"]


@attrs.frozen
class ReadLimits:
    """What bounds the read: the turns the turn limit keeps (at least 1), the turns whose tool
    context the request keeps, and the effective token budget (0: trimming is off)."""

    keep_turns: int
    keep_tools: int
    budget: int


@attrs.frozen
class ReadBack:
    """The rows read, oldest first; the real user turns among them; whether they reach back to
    the conversation's first row."""

    rows: list[StoredMessage]
    turns: int
    whole: bool


def read_limits(
    context: ContextSettings, route: Route, keep_tool_context_turns: int | None
) -> ReadLimits:
    """The limits of one request: the settings, the route's budget and the request's own
    ``keepToolContextTurns`` (None: the settings')."""
    keep_tools = keep_tool_context_turns
    if keep_tools is None:
        keep_tools = context.tool_context_turns()
    return ReadLimits(
        keep_turns=max(1, context.max_history_turns),
        keep_tools=keep_tools,
        budget=effective_budget(context, route),
    )


def read_back(newest_first: Iterable[StoredMessage], limits: ReadLimits) -> ReadBack:
    """Consume ``newest_first`` (the conversation's rows, newest first) until the turns left are
    ones the request drops; the rows read come back oldest first."""
    newest: list[StoredMessage] = []
    turns = floor = turn_end = 0
    for row in newest_first:
        newest.append(row)
        if row.role != "user" or not is_real_user(row):
            continue
        turns += 1
        floor += turn_floor(tuple(newest[turn_end:][::-1]))
        turn_end = len(newest)
        if turns > limits.keep_tools and (turns >= limits.keep_turns or 0 < limits.budget < floor):
            return ReadBack(newest[::-1], turns, whole=False)
    return ReadBack(newest[::-1], turns, whole=True)


def omitted_ranges(
    oldest_turn: int,
    first_read_turn: int,
    turns_read: int,
    keep_turns: int,
    *,
    first_kept: int | None = None,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The unread turns ``oldest_turn``..``first_read_turn - 1`` as (first, last) ranges: those
    beyond the turn limit, then those within it (which the budget drops). Turn numbers of the
    stored turns are consecutive; an empty range has first > last. ``first_kept``: the turn
    limit's line of the stable prefix (``stepped_first_turn``), which replaces the count."""
    split = max(oldest_turn, first_read_turn - max(0, keep_turns - turns_read))
    if first_kept is not None:
        split = max(oldest_turn, min(first_kept, first_read_turn))
    return (oldest_turn, split - 1), (split, first_read_turn - 1)


def stepped_first_turn(
    context: ContextSettings, limits: ReadLimits, newest_turn: int
) -> int | None:
    """With trimLowWater below 1, the first turn number the turn limit keeps
    (``policy.prepare.steps``) when ``newest_turn`` is running; else None."""
    steps = steps_of(
        context.trim_low_water,
        max_turns=context.max_history_turns,
        keep_tools=limits.keep_tools,
        budget=limits.budget,
    )
    if steps is None:
        return None
    line = collapse_line(steps, newest_turn, limits.keep_tools)
    return first_kept_turn(steps, line, limits.keep_tools, context.max_history_turns)


def omitted_figures(
    ranges: Sequence[tuple[int, int]], lookup: FigureLookup
) -> list[TurnFigures] | None:
    """The figures of each range, or None when one of them was not recorded (turns written
    before schema 2)."""
    groups: list[TurnFigures] = []
    for first, last in ranges:
        if first > last:
            groups.append(TurnFigures())
            continue
        values = lookup(first, last)
        if values is None:
            return None
        groups.append(TurnFigures(*values))
    return groups


_NO_FIGURES = TurnFigures()


def checked_omission(
    beyond_limit: TurnFigures,
    within_limit: TurnFigures,
    *,
    left_out: tuple[int, int],
    tools_given: bool,
    covered: TurnFigures = _NO_FIGURES,
    covers_through_id: int | None = None,
    oldest_spoken_id: int | None = None,
) -> OmittedTurns | None:
    """The unread turns as ``prepare_rows`` counts them, or None when every row must be read:
    their figures (the ``covered`` ones included) do not add up to the ``left_out`` (rows,
    tokens) the totals show (a turn deleted out of order, or turns without figures), or the
    request names tools and some of the uncovered ones have prompt-mode calls (whose collapse
    depends on those names; covered turns are not sent at all). ``oldest_spoken_id`` is the
    conversation's oldest non-system row (whether a summary precedes every stored turn)."""
    both = beyond_limit + within_limit
    every = both + covered
    if (every.spoken_rows, every.spoken_tokens) != left_out:
        return None
    if tools_given and both.tool_dependent:
        return None
    return OmittedTurns(
        beyond_limit,
        within_limit,
        covered=covered,
        covers_through_id=covers_through_id,
        oldest_spoken_id=oldest_spoken_id,
    )


def left_out(message_count: int, tokens: int, read: Sequence[StoredMessage]) -> tuple[int, int]:
    """The (rows, tokens) of a conversation with these totals that ``read`` does not hold."""
    return message_count - len(read), tokens - sum(row.tokens for row in read)


# -- a summary's coverage -------------------------------------------------------------------------


def until_turn(newest_first: Iterable[StoredMessage], first_turn: int) -> Iterator[StoredMessage]:
    """``newest_first`` down to the rows of turn ``first_turn`` (the oldest uncovered one):
    stops at the first row of an older turn, which the summary covers."""
    for row in newest_first:
        if row.turn < first_turn:
            return
        yield row


def covered_range(oldest_turn: int, first_uncovered_turn: int | None) -> tuple[int, int]:
    """The covered turns ``oldest_turn``..``first_uncovered_turn - 1`` (empty when first > last,
    or without coverage)."""
    if first_uncovered_turn is None:
        return (oldest_turn, oldest_turn - 1)
    return (oldest_turn, first_uncovered_turn - 1)


def read_head(
    oldest_first: Iterable[StoredMessage], *, stop_id: int, limit: int, calibration: Calibration
) -> list[StoredMessage]:
    """The oldest uncovered rows, whole turns only, that a compaction proposal may cover: up to
    the first row the request itself read (``stop_id``), or through the turn whose lower bound
    (``turn_floor``, calibrated) passes ``limit`` (budget - maxSummaryTokens): no proposal holds
    that turn, so none needs a later one."""
    rows: list[StoredMessage] = []
    start = 0  # where the current turn's rows begin in ``rows``
    floors = 0
    for row in oldest_first:
        if row.id >= stop_id:
            break
        if row.role == "user" and is_real_user(row) and start < len(rows):
            floors += turn_floor(tuple(rows[start:]))
            if calibration.apply(floors) > limit:
                return rows
            start = len(rows)
        rows.append(row)
    return rows
