"""How a request is trimmed to its limits (semantics.md "Request-time preparation" steps 5-8):
the turn limit, the token budget (on the stable prefix's grids when ``trimLowWater`` < 1),
overflow recovery, the capacity check, the trim report, and the rows assembled in order."""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.errors import ContextOverflow
from chat_history.model import Message, StoredMessage
from chat_history.policy.prepare import steps as grid
from chat_history.policy.prepare.collapse import TurnFigures
from chat_history.policy.prepare.memo import TurnMemo
from chat_history.policy.prepare.request import RequestOptions, RequestTrim, _Request
from chat_history.policy.prepare.steps import Steps
from chat_history.policy.prepare.window import (
    _TURN_CACHE,
    _TURN_CACHE_BYTES,
    OmittedTurnsKept,
    _collapsed,
    _Unit,
    _Window,
)
from chat_history.policy.tokens import row_tokens
from chat_history.policy.turns import (
    Turn,
)
from chat_history.settings import ContextSettings

_position_memo: TurnMemo[int] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)


def _turn_number(turn: Turn[Message]) -> int:
    """A turn's stored number (its rows' own order when they are not stored rows)."""
    first = turn.rows[0]
    return first.turn if isinstance(first, StoredMessage) else turn.number


def _collapse_line(numbers: Sequence[int], request: _Request) -> int | None:
    """The stable prefix's tool-context line (turns numbered below it are collapsed), or None
    (trimLowWater 1, or no turns)."""
    if request.steps is None or not numbers:
        return None
    return grid.collapse_line(request.steps, numbers[-1], request.keep)


def _position_tokens(rows: tuple[Message, ...], tools: frozenset[str] | None) -> int:
    """What a completed turn adds to the positions of the turns after it: its non-system
    estimate collapsed (``TurnFigures.sent_tokens``), remembered like the collapse."""

    def compute() -> int:
        sent, _ = _collapsed(rows, tools)
        return sum(row_tokens(row) for row in sent if row.role != "system")

    return _position_memo.get(rows, tools, compute)


def _positions(
    left_out: Sequence[TurnFigures], turns: Sequence[Turn[Message]], request: _Request
) -> list[int]:
    """The budget grid's positions (``policy.prepare.steps``) of the window's first turns: each
    omitted group's, then each sent turn's."""
    positions: list[int] = []
    position = 0
    for group in left_out:
        if group.turns:
            positions.append(position)
            position += group.sent_tokens
    for turn in turns:
        positions.append(position)
        position += _position_tokens(turn.rows, request.tool_names)
    return positions


def _excess(units: Sequence[_Unit], turns: Sequence[Turn[Message]], request: _Request) -> list[int]:
    """``_Window.excess`` of each unit: none for a turn below the tool-context line, all of it
    for the turns above it (the running one too). So the settled part of a request changes only
    when the tool-context line moves, and the budget moves with it, not on another request."""
    numbers = [_turn_number(turn) for turn in turns]
    line = _collapse_line(numbers, request)
    last = len(units) - 1
    return [
        0 if line is not None and i < last and numbers[i] < line else u.tokens - u.system_tokens
        for i, u in enumerate(units)
    ]


def _trim_stepped(
    window: _Window, steps: Steps, settings: ContextSettings, budget: int, keep_tools: int
) -> None:
    """Steps 4 and 5 on the stable prefix's grids (``policy.prepare.steps``). The budget is judged
    first, from the oldest uncovered turn, so its line does not depend on where the turn
    limit's grid puts the first turn (judged after it, a turn-limit jump could let the first
    sent turn move back)."""
    if budget > 0 and steps.token_step:
        _trim_budget_stepped(window, steps, budget)
    if window.numbers:
        collapse = grid.collapse_line(steps, window.numbers[-1], keep_tools)
        first = grid.first_kept_turn(steps, collapse, keep_tools, settings.max_history_turns)

        def beyond_limit() -> bool:
            if not window.omitted:
                return window.numbers[0] < first
            # The omitted turns are numbered consecutively up to the first unit's (their figures
            # are recorded only so): a group is dropped whole, so it must lie on one side.
            newest = window.numbers[0] - 1 - sum(group.turns for group in window.omitted[1:])
            oldest = newest - window.omitted[0].turns + 1
            if oldest < first <= newest:
                raise OmittedTurnsKept("the turn limit's line falls inside omitted turns")
            return newest < first

        window.trim("turnLimit", None, beyond_limit)


def _trim_budget_stepped(window: _Window, steps: Steps, budget: int) -> None:
    """Step 5 on the budget's grid: drop up to the next line while the settled part is over
    budget x trimLowWater or the request over the budget."""
    low_water = budget - steps.token_step
    calibration = window.calibration
    line: int | None = None

    def over_budget() -> bool:
        nonlocal line
        position = window.positions[0]
        if line is None or position >= line:
            settled = calibration.apply(window.estimate - window.excess_total)
            if settled <= low_water and window.calibrated() <= budget:
                return False
            line = grid.next_line(position, steps.token_step)
        # a move goes on to the line; an omitted group is dropped whole, so the line must not
        # fall inside it (where it ends, the next group or unit begins)
        if window.omitted and len(window.positions) > 1 and window.positions[1] > line:
            raise OmittedTurnsKept("the budget's line falls inside omitted turns")
        return True

    window.trim("tokenBudget", budget, over_budget)


def _trim(window: _Window, options: RequestOptions, request: _Request) -> None:
    """Steps 4-6: turn limit, token budget, overflow recovery."""
    settings = options.settings
    budget = request.budget
    if request.steps is not None:
        _trim_stepped(window, request.steps, settings, budget, request.keep)
    else:
        # Step 4: turn limit (0 keeps the newest turn).
        keep_turns = max(1, settings.max_history_turns)
        window.trim("turnLimit", None, lambda: window.turns() > keep_turns)

        # Step 5: token budget (trimLowWater 1: to the budget itself).
        if budget > 0 and window.calibrated() > budget:
            window.trim("tokenBudget", budget, lambda: window.calibrated() > budget)
    if window.omitted:
        raise OmittedTurnsKept("the request keeps turns that were left out of its rows")

    # Step 6: overflow recovery, to at most two thirds of the current estimate.
    if options.overflow_recovery:
        recovery = 2 * window.calibrated() // 3
        window.trim("overflowRecovery", recovery, lambda: window.calibrated() > recovery)


def _assemble(window: _Window, note: Message | None) -> list[Message]:
    """Step 7: the system block, the context note once, then the retained turns."""
    sent_rows: list[Message] = list(window.system_block)
    if note is not None:
        sent_rows.append(note)
    for unit in window.units:
        sent_rows.extend(unit.rows)
    return sent_rows


def _capacity_check(
    swept: Sequence[Message], window: _Window, fixed: int, options: RequestOptions
) -> tuple[int, int]:
    """Step 9: the final estimate (raw, calibrated), running-turn tool images dispatched;
    ContextOverflow when it exceeds a known window. (Step 8, the orphan sweep, made ``swept``:
    only an already inconsistent history loses anything there.)"""
    running_tools = (
        {id(row) for row in window.units[-1].rows if row.role == "tool"} if window.units else set()
    )
    raw = fixed
    for row in swept:
        raw += row_tokens(row, dispatch_tool_images=id(row) in running_tools)
    estimated = options.calibration.apply(raw)
    window_size = options.route.context_window
    if window_size is not None and estimated > window_size:
        raise ContextOverflow(estimated, window_size)
    return raw, estimated


def _request_trim(window: _Window, tokens_before: int, estimated: int) -> RequestTrim | None:
    """Step 10: the report of the steps that dropped turns, if any did."""
    if window.last_reason is None:
        return None
    return RequestTrim(
        dropped_messages=window.dropped_messages,
        dropped_turns=window.dropped_turns,
        retained_turns=len(window.units),
        reason=window.last_reason,
        tokens_before=tokens_before,
        tokens_after=estimated,
    )
