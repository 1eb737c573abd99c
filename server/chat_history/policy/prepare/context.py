"""Request-time context preparation (semantics.md, "Request-time preparation" steps 2½-10): the
summary standing in for the turns it covers, tool context collapse, turn limit, token budget,
overflow recovery, context note, orphan sweep, the capacity check and the report, with the
compaction proposal (semantics.md "Version 2"). Pure: it builds what one request sends and never
edits stored rows.

Every step moves whole turns; the running (newest) turn is always sent whole. A dropped or
covered turn's ``system`` rows are not dropped: they move up to follow the leading system rows,
and the context note (breadcrumb and summary, ``policy/prepare/compaction.py``) follows them, right
before the first retained turn. Every estimate compared with the budget, the compaction trigger
or the window, and every token figure reported, is calibrated (``policy/calibration.py``).

A caller may leave out old turns that the request drops anyway and pass their totals instead
(``OmittedTurns``, summed from ``turn_figures``), so that a request costs what it sends, not what
is stored; the result is the same as with every row.

The pipeline is here; its parts by job: ``request`` (the options and the result), ``collapse``
(tool context collapse and a turn's figures), ``window`` (turns as they would be sent, the
omitted turns) and ``trim`` (the limit, the budget, recovery, the capacity check, the report).
"""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.model import Message
from chat_history.policy.budget import effective_budget
from chat_history.policy.prepare.collapse import TurnFigures
from chat_history.policy.prepare.compaction import (
    BREADCRUMB as BREADCRUMB,
)
from chat_history.policy.prepare.compaction import (
    Coverage,
    Proposal,
    SpanTurn,
    compaction_due,
    context_note,
    coverage,
    oldest_spoken_id,
    precedes,
    propose,
)
from chat_history.policy.prepare.request import (
    Prepared,
    RequestOptions,
    _check_non_negative,
    _note_tokens,
    _Request,
    _summary_parts,
)
from chat_history.policy.prepare.steps import steps_of
from chat_history.policy.prepare.trim import (
    _assemble,
    _capacity_check,
    _collapse_line,
    _excess,
    _positions,
    _request_trim,
    _trim,
    _turn_number,
)
from chat_history.policy.prepare.window import (
    OmittedTurns,
    OmittedTurnsKept,
    _collapsed,
    _Unit,
    _unit,
    _Window,
)
from chat_history.policy.sweep import sweep_orphans
from chat_history.policy.tokens import tool_schema_tokens
from chat_history.policy.turns import (
    Turn,
    segment,
)


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
