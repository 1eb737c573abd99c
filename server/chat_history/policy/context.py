"""Request-time context preparation (semantics.md, "Request-time preparation" steps 2½-10): the
summary standing in for the turns it covers, tool context collapse, turn limit, token budget,
overflow recovery, context note, orphan sweep, the capacity check and the report, with the
compaction proposal (semantics.md "Version 2"). Pure: it builds what one request sends and never
edits stored rows.

Every step moves whole turns; the running (newest) turn is always sent whole. A dropped or
covered turn's ``system`` rows are not dropped: they move up to follow the leading system rows,
and the context note (breadcrumb and summary, ``policy/compaction.py``) follows them, right
before the first retained turn. Every estimate compared with the budget, the compaction trigger
or the window, and every token figure reported, is calibrated (``policy/calibration.py``).

A caller may leave out old turns that the request drops anyway and pass their totals instead
(``OmittedTurns``, summed from ``turn_figures``), so that a request costs what it sends, not what
is stored; the result is the same as with every row.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence
from typing import Literal

import attrs

from chat_history.errors import ContextOverflow, InvalidParams
from chat_history.model import Message, StoredMessage, Summary, ToolSpec, Trimmed
from chat_history.policy import steps as grid
from chat_history.policy.budget import Route, effective_budget
from chat_history.policy.calibration import UNCALIBRATED, Calibration
from chat_history.policy.compaction import (
    BREADCRUMB as BREADCRUMB,
)
from chat_history.policy.compaction import (
    Coverage,
    Proposal,
    SpanTurn,
    compaction_due,
    context_note,
    coverage,
    oldest_spoken_id,
    precedes,
    propose,
    summary_text,
)
from chat_history.policy.memo import TurnMemo
from chat_history.policy.steps import Steps, steps_of
from chat_history.policy.sweep import sweep_orphans
from chat_history.policy.tokens import row_tokens, tool_schema_tokens
from chat_history.policy.turns import (
    TOOL_RESULTS_PREFIX,
    Turn,
    carrier_calls,
    is_in_turn_user,
    is_real_user,
    segment,
)
from chat_history.settings import ContextSettings

#: The assistant row a collapsed turn that no reply closed is sent with.
COLLAPSED_EXCHANGE = "[Tool exchange: {n} tool call(s) — results collapsed]"

RequestTrimReason = Literal["turnLimit", "tokenBudget", "overflowRecovery"]


@attrs.frozen(kw_only=True)
class RequestTrim:
    """``PreparedRequest.trimmed``: totals over steps 4-6; ``reason`` names the last step that
    dropped turns. ``tokens_before`` is the estimate after the collapse, before step 4; both
    token figures are calibrated.

    ``dropped_messages`` counts the dropped turns' stored rows other than their system rows
    (which move up), whatever step 3 had made of them (semantics.md step 10): every stored row is
    sent, collapsed in a sent turn (``collapsed_tool_rows``), dropped or compacted."""

    dropped_messages: int
    dropped_turns: int
    retained_turns: int
    reason: RequestTrimReason
    tokens_before: int
    tokens_after: int


@attrs.frozen(kw_only=True)
class Prepared:
    """What ``prepare`` sends, with its report.

    ``rows`` are ready for the provider formatter; ``budget`` is None when proactive trimming is
    off; ``events`` are the ``chatHistory/trimmed`` notifications (scope ``request``), one per
    step that dropped turns. ``estimated_tokens`` and the token figures of ``trimmed`` and
    ``events`` are calibrated by ``calibration``; ``raw_estimated_tokens`` is not.
    ``collapsed_*`` count sent turns only; ``compacted_*`` the turns the summary stood in for and
    their stored rows other than system rows. ``compaction`` is the proposal, if any."""

    rows: tuple[Message, ...]
    estimated_tokens: int
    budget: int | None
    context_window: int | None
    trimmed: RequestTrim | None
    collapsed_tool_rows: int
    collapsed_turns: int
    events: tuple[Trimmed, ...]
    raw_estimated_tokens: int
    calibration: Calibration
    compacted_turns: int
    compacted_messages: int
    compaction: Proposal | None


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


@attrs.frozen
class OmittedTurns:
    """The oldest turns of a conversation, left out of ``prepare_rows``'s rows (their system rows
    stay in, as leading system rows). The caller vouches for what makes the result equal to the
    full one: the summary stands in for the ``covered`` turns, the oldest (its coverage is
    ``covers_through_id``, which must be the summary's own); each other omitted turn is older
    than the newest ``keepToolContextTurns + 1`` (so it is collapsed); the turn limit drops the
    ``beyond_limit`` turns; the token budget drops the ``within_limit`` ones, which the turn
    limit keeps. ``oldest_spoken_id`` is the id of the conversation's oldest non-system row,
    which the summary's coverage is compared with when uncovered turns are left out (a summary
    that precedes it stands in for deleted turns)."""

    beyond_limit: TurnFigures = TurnFigures()
    within_limit: TurnFigures = TurnFigures()
    covered: TurnFigures = attrs.field(default=TurnFigures(), kw_only=True)
    covers_through_id: int | None = attrs.field(default=None, kw_only=True)
    oldest_spoken_id: int | None = attrs.field(default=None, kw_only=True)


class OmittedTurnsKept(ValueError):
    """The request would have sent an omitted turn: it needs every row."""


@attrs.frozen
class _Unit:
    """One turn as it would be sent: its rows, their estimate, its system rows, its stored rows
    other than system rows (``dropped_messages`` when it is dropped, whatever step 3 made of it)
    and the rows step 3 left out."""

    rows: tuple[Message, ...]
    tokens: int
    system_rows: tuple[Message, ...]
    system_tokens: int
    spoken_rows: int
    collapsed_rows: int


# A request re-reads mostly the turns the previous one read, as the same row objects (the store
# remembers a conversation's newest rows), and a turn's collapse, floor and unit depend on its
# rows alone: these are remembered on the row tuples (policy.memo), bounded in turns and in the
# bytes of the rows they keep alive.
_TURN_CACHE = 256  # turns: a few requests of a few conversations
_TURN_CACHE_BYTES = 32 * 1024 * 1024
_collapsed_memo: TurnMemo[tuple[tuple[Message, ...], int]] = TurnMemo(
    _TURN_CACHE, _TURN_CACHE_BYTES
)
_floor_memo: TurnMemo[int] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)
_unit_memo: TurnMemo[_Unit] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)


def _collapsed(
    rows: tuple[Message, ...], tools: frozenset[str] | None
) -> tuple[tuple[Message, ...], int]:
    return _collapsed_memo.get(rows, tools, lambda: collapse_turn(rows, tools))


def turn_floor(rows: tuple[Message, ...]) -> int:
    """``request_floor`` of one turn's rows, remembered (the window asks it of every turn it
    reads)."""
    return _floor_memo.get(rows, None, lambda: request_floor(rows))


def _unit(rows: tuple[Message, ...], *, running: bool, synthetic: int, removed: int) -> _Unit:
    return _unit_memo.get(
        rows,
        (running, synthetic, removed),
        lambda: _new_unit(rows, running=running, synthetic=synthetic, removed=removed),
    )


def _new_unit(rows: tuple[Message, ...], *, running: bool, synthetic: int, removed: int) -> _Unit:
    tokens = system_tokens = 0
    system: list[Message] = []
    for row in rows:
        cost = row_tokens(row, dispatch_tool_images=running)
        tokens += cost
        if row.role == "system":
            system.append(row)
            system_tokens += cost  # images are dispatched differently on tool rows only
    return _Unit(
        rows=rows,
        tokens=tokens,
        system_rows=tuple(system),
        system_tokens=system_tokens,
        spoken_rows=len(rows) - len(system) - synthetic + removed,
        collapsed_rows=removed,
    )


class _Window:
    """The request being trimmed: the system block (leading system rows plus the system rows of
    covered and dropped turns), the retained turns, and a running (raw) estimate that includes
    the context note: ``note_tokens`` before any turn is dropped (0 when there is no note),
    ``dropped_note_tokens`` once one is."""

    def __init__(
        self,
        leading: Sequence[Message],
        units: list[_Unit],
        note_tokens: tuple[int, int],
        fixed: int,
        omitted: list[TurnFigures],
        calibration: Calibration,
        numbers: list[int] | None = None,
    ) -> None:
        self.system_block = list(leading)
        self.units = units
        #: the units' stored turn numbers and grid positions (``policy.steps``), with trimLowWater
        #: below 1 only: the positions of the omitted groups' first turns, then of the units
        self.numbers = numbers or []
        self.positions: list[int] = []
        #: each unit's tokens beyond what it adds to the positions (its kept tool context; all
        #: of the running turn): the estimate less their sum is the settled part of the request
        self.excess: list[int] = []
        self.excess_total = 0
        #: omitted turns, oldest group first: each group is dropped whole, before any unit
        self.omitted = [group for group in omitted if group.turns]
        self.note_tokens, dropped_note_tokens = note_tokens
        self.crumb_tokens = dropped_note_tokens - self.note_tokens
        self.calibration = calibration
        self.dropped_turns = 0
        self.dropped_messages = 0
        self.events: list[Trimmed] = []
        self.last_reason: RequestTrimReason | None = None
        self.estimate = (
            fixed
            + self.note_tokens
            + sum(row_tokens(row) for row in leading)
            + sum(group.sent_tokens for group in self.omitted)
            + sum(u.tokens for u in units)
        )

    def calibrated(self) -> int:
        return self.calibration.apply(self.estimate)

    def turns(self) -> int:
        return sum(group.turns for group in self.omitted) + len(self.units)

    def drop_oldest(self) -> None:
        if self.omitted:
            group = self.omitted.pop(0)
            if self.positions:
                self.positions.pop(0)
            self.estimate -= group.sent_tokens
            if self.dropped_turns == 0:
                self.estimate += self.crumb_tokens
            self.dropped_turns += group.turns
            self.dropped_messages += group.spoken_rows
            return
        unit = self.units.pop(0)
        if self.numbers:
            self.numbers.pop(0)
        if self.positions:
            self.positions.pop(0)
        if self.excess:
            self.excess_total -= self.excess.pop(0)
        self.system_block.extend(unit.system_rows)
        self.estimate -= unit.tokens - unit.system_tokens
        if self.dropped_turns == 0:
            self.estimate += self.crumb_tokens
        self.dropped_turns += 1
        self.dropped_messages += unit.spoken_rows

    def trim(self, reason: RequestTrimReason, budget: int | None, over: Callable[[], bool]) -> None:
        """One of steps 4-6: drop oldest turns while ``over()`` holds, never the newest, and
        record the step's event (calibrated figures) when it dropped any."""
        before, turns, messages = self.calibrated(), self.dropped_turns, self.dropped_messages
        while self.turns() > 1 and over():
            self.drop_oldest()
        if self.dropped_turns == turns:
            return
        self.last_reason = reason
        self.events.append(
            Trimmed(
                scope="request",
                reason=reason,
                dropped_messages=self.dropped_messages - messages,
                dropped_turns=self.dropped_turns - turns,
                retained_turns=self.turns(),
                tokens_before=before,
                tokens_after=self.calibrated(),
                budget=budget,
            )
        )


def _check_non_negative(field: str, value: int) -> None:
    if value < 0:
        raise InvalidParams(field, "must be at least 0")


def _summary_parts(summary: str | Summary | None) -> tuple[str | None, int | None]:
    """The summary's text (None when blank) and its coverage; a plain string covers nothing."""
    if isinstance(summary, Summary):
        text = summary_text(summary.summary)
        return text, summary.covers_through_id if text is not None else None
    return summary_text(summary), None


def _note_tokens(note: Message | None) -> int:
    return row_tokens(note) if note is not None else 0


@attrs.frozen(kw_only=True)
class RequestOptions:
    """What one request asks of ``prepare_rows`` besides its rows.

    ``summary`` is the conversation's summary: a ``Summary`` with ``covers_through_id`` stands
    in for the turns it covers (rows must then be stored rows, whose ids it compares); a string
    or a summary without coverage is only sent after the breadcrumb. ``tools`` decides which
    prompt-mode calls count as carriers (None: any name) and adds its schemas to every estimate,
    as does ``extra_tokens``. ``keep_tool_context_turns`` overrides the setting (and its
    preset). ``calibration`` scales every estimate compared or reported. With
    ``propose_compaction``, the result carries the compaction proposal the settings call for.
    ``omitted`` stands for the conversation's oldest turns when the rows leave them out (see
    OmittedTurns). ``head``, called only when a due proposal needs them, answers the rows of
    the oldest uncovered turns that ``omitted`` left out: the system rows before them, then
    whole turns, oldest first (all of the left-out ones, or at least those through the first
    that no proposal can hold); none: OmittedTurnsKept."""

    settings: ContextSettings
    route: Route
    summary: str | Summary | None = None
    tools: Sequence[ToolSpec] | None = None
    extra_tokens: int = 0
    overflow_recovery: bool = False
    keep_tool_context_turns: int | None = None
    omitted: OmittedTurns | None = None
    calibration: Calibration = UNCALIBRATED
    propose_compaction: bool = False
    head: Callable[[], Sequence[Message]] | None = None


@attrs.frozen
class _Request:
    """The options worked out once: the collapse depth, the tool names, the fixed tokens (tool
    schemas and ``extraTokens``), the budget, the summary's text and coverage, and the omitted
    turns (groups dropped whole, then the covered ones)."""

    keep: int
    tool_names: frozenset[str] | None
    fixed: int
    budget: int
    text: str | None
    covers_through_id: int | None
    left_out: list[TurnFigures]
    omitted_turns: int
    pre_covered: TurnFigures
    #: the stable prefix's grids (trimLowWater below 1), else None
    steps: Steps | None


def prepare_rows(rows: Sequence[Message], options: RequestOptions) -> Prepared:
    """Build one provider request from a conversation's rows (steps 2½-10), as ``options`` asks.

    OmittedTurnsKept when ``options.omitted`` left out a turn the request would have sent, or
    whose rows it needs (a summary's coverage, a compaction proposal). Raises ContextOverflow
    when the route's window is known and the final estimate exceeds it, whether or not
    proactive trimming is on."""
    request = _request(options)
    segmented = segment(rows)
    turns = segmented.turns
    covered = _covered_turns(turns, request)
    compacted_turns = request.pre_covered.turns + covered.turns
    numbers = [_turn_number(turn) for turn in turns] if request.steps is not None else []
    all_units = _sent_units(turns, covered.turns, request, numbers)
    note, dropped_note = _notes(rows, options, request, compacted_turns)
    system_block = [*segmented.leading_system, *covered.moved_system]
    window = _Window(
        system_block,
        list(all_units),
        (_note_tokens(note), _note_tokens(dropped_note)),
        request.fixed,
        request.left_out,
        options.calibration,
        numbers[covered.turns :],
    )
    if request.steps is not None:
        sent_turns = turns[covered.turns :]
        window.positions = _positions(request.left_out, sent_turns, request)
        window.excess = _excess(all_units, sent_turns, request)
        window.excess_total = sum(window.excess)
    tokens_before = window.calibrated()
    due = options.propose_compaction and compaction_due(
        tokens_before, request.budget, options.settings, request.omitted_turns + len(all_units)
    )
    if due and request.omitted_turns and options.head is None:
        raise OmittedTurnsKept("a compaction proposal needs the rows of the oldest turns")
    _trim(window, options, request)
    swept = sweep_orphans(_assemble(window, dropped_note if window.dropped_turns else note))
    raw, estimated = _capacity_check(swept, window, request.fixed, options)
    proposal = None
    if due:
        span = [SpanTurn(unit.rows, turns[covered.turns + i]) for i, unit in enumerate(all_units)]
        proposal = _proposal(system_block, span, compacted_turns, request, options)
    return Prepared(
        rows=tuple(swept),
        estimated_tokens=estimated,
        budget=request.budget if request.budget > 0 else None,
        context_window=options.route.context_window,
        trimmed=_request_trim(window, tokens_before, estimated),
        collapsed_tool_rows=sum(unit.collapsed_rows for unit in window.units),
        collapsed_turns=sum(1 for unit in window.units if unit.collapsed_rows),
        events=tuple(window.events),
        raw_estimated_tokens=raw,
        calibration=options.calibration,
        compacted_turns=compacted_turns,
        compacted_messages=request.pre_covered.spoken_rows + covered.messages,
        compaction=proposal,
    )


def _notes(
    rows: Sequence[Message], options: RequestOptions, request: _Request, compacted_turns: int
) -> tuple[Message | None, Message | None]:
    """The context note the request sends when no turn is dropped, and when some are."""
    stands_in = compacted_turns > 0 or precedes(
        request.covers_through_id, _oldest_spoken(rows, options.omitted, request)
    )
    kept, dropped = (
        context_note(
            request.text,
            has_coverage=request.covers_through_id is not None,
            stands_in=stands_in,
            dropped=dropped,
        )
        for dropped in (False, True)
    )
    return kept, dropped


def _request(options: RequestOptions) -> _Request:
    """Check the options and work out what every step needs; the omitted turns must have been
    left out for this summary's coverage."""
    _check_non_negative("extra_tokens", options.extra_tokens)
    keep = options.keep_tool_context_turns
    if keep is None:
        keep = options.settings.tool_context_turns()
    _check_non_negative("keep_tool_context_turns", keep)
    tools = options.tools
    text, covers_through_id = _summary_parts(options.summary)
    omitted = options.omitted
    left_out = [omitted.beyond_limit, omitted.within_limit] if omitted is not None else []
    omitted_turns = sum(group.turns for group in left_out)
    pre_covered = omitted.covered if omitted is not None else TurnFigures()
    if omitted is not None and (omitted_turns or pre_covered.turns):
        if omitted.covers_through_id != covers_through_id:
            raise OmittedTurnsKept("the turns were left out for another summary coverage")
        if pre_covered.turns and covers_through_id is None:
            raise OmittedTurnsKept("no summary stands in for the covered turns left out")
    budget = effective_budget(options.settings, options.route)
    steps = steps_of(
        options.settings.trim_low_water,
        max_turns=options.settings.max_history_turns,
        keep_tools=keep,
        budget=budget,
    )
    return _Request(
        keep=keep,
        tool_names=None if tools is None else frozenset(tool.name for tool in tools),
        fixed=options.extra_tokens + sum(tool_schema_tokens(tool) for tool in tools or ()),
        budget=budget,
        text=text,
        covers_through_id=covers_through_id,
        left_out=left_out,
        omitted_turns=omitted_turns,
        pre_covered=pre_covered,
        steps=steps,
    )


def _covered_turns(turns: Sequence[Turn[Message]], request: _Request) -> Coverage:
    """Step 2½: the summary stands in for the completed turns it covers (those left out
    first)."""
    covered = coverage(turns, request.covers_through_id)
    if covered.turns and request.omitted_turns:
        raise OmittedTurnsKept("covered turns follow uncovered turns that were left out")
    return covered


def _oldest_spoken(
    rows: Sequence[Message], omitted: OmittedTurns | None, request: _Request
) -> int | None:
    """The id of the conversation's oldest non-system row: the caller's when uncovered turns
    were left out of ``rows`` (OmittedTurnsKept when it gave none and a coverage needs it)."""
    if not request.omitted_turns:
        return oldest_spoken_id(rows)
    assert omitted is not None
    if omitted.oldest_spoken_id is None and request.covers_through_id is not None:
        raise OmittedTurnsKept("a summary's coverage needs the oldest row of the omitted turns")
    return omitted.oldest_spoken_id


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


def _sent_units(
    turns: Sequence[Turn[Message]], first: int, request: _Request, numbers: Sequence[int]
) -> tuple[_Unit, ...]:
    """Step 3: the turns from ``first`` on as sent, completed turns older than the newest
    ``keep`` collapsed (with the stable prefix's grid: those numbered below its line)."""
    collapse_before = max(0, len(turns) - 1 - request.keep)
    line = _collapse_line(numbers, request)
    units: list[_Unit] = []
    for index in range(first, len(turns)):
        turn = turns[index]
        sent, removed = turn.rows, 0
        collapsed = index < collapse_before
        if line is not None:
            collapsed = numbers[index] < line and index < len(turns) - 1
        if collapsed:
            sent, removed = _collapsed(turn.rows, request.tool_names)
        synthetic = len(sent) - (len(turn.rows) - removed)
        units.append(
            _unit(sent, running=index == len(turns) - 1, synthetic=synthetic, removed=removed)
        )
    return tuple(units)


_position_memo: TurnMemo[int] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)


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
    """The budget grid's positions (``policy.steps``) of the window's first turns: each omitted
    group's, then each sent turn's."""
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
    """Steps 4 and 5 on the stable prefix's grids (``policy.steps``). The budget is judged
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


def _head_span(
    head: Sequence[Message], sent: list[SpanTurn], request: _Request
) -> tuple[Sequence[Message], list[SpanTurn]]:
    """The proposal's system block and span when the oldest uncovered turns were left out of
    the rows: the ``head`` turns (collapsed, as every omitted turn is), then the sent turns when
    the head holds every omitted turn. (The span is cut to spare the newest turns later.)"""
    segmented = segment(head)
    if not segmented.turns or len(segmented.turns) > request.omitted_turns:
        raise OmittedTurnsKept("no head, or one that holds turns the request read")
    span = [
        SpanTurn(_collapsed(turn.rows, request.tool_names)[0], turn) for turn in segmented.turns
    ]
    if len(span) == request.omitted_turns:
        span += sent
    return segmented.leading_system, span


def _proposal(
    system_block: Sequence[Message],
    sent: list[SpanTurn],
    covered_turns: int,
    request: _Request,
    options: RequestOptions,
) -> Proposal | None:
    """The compaction proposal over the uncovered turns but the newest
    ``compactionKeepRecentTurns``: the ``sent`` ones, after the omitted ones from ``head``."""
    uncovered_turns = request.omitted_turns + len(sent)
    turns = sent
    if request.omitted_turns:
        system_block, turns = _head_span(options.head() if options.head else (), sent, request)
    span_end = uncovered_turns - options.settings.compaction_keep_recent_turns
    return propose(
        system_block=system_block,
        summary=request.text,
        span=turns[: max(0, span_end)],
        covered_turns=covered_turns,
        settings=options.settings,
        budget=request.budget,
        calibration=options.calibration,
    )
