"""Compaction on the pure pipeline (semantics.md "Version 2": Summary standing in, When
compaction is proposed; step 7's context note; step 10's exact counts): the scenarios of the spec,
one rule per test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from rows import A, S, T, U, as_stored

from chat_history.model import Message, StoredMessage, Summary
from chat_history.policy.budget import Route
from chat_history.policy.calibration import Calibration
from chat_history.policy.prepare.collapse import (
    COLLAPSED_EXCHANGE,
    TurnFigures,
    collapse_turn,
    turn_figures,
)
from chat_history.policy.prepare.compaction import (
    BREADCRUMB,
    DEFAULT_PROMPT,
    SUMMARY_HEADER,
    coverage,
    prompt_row,
)
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions
from chat_history.policy.prepare.window import OmittedTurns, OmittedTurnsKept
from chat_history.policy.tokens import row_tokens
from chat_history.policy.turns import segment
from chat_history.settings import ContextSettings, default_settings

UNKNOWN = Route("openai", "openai", None, None)
BIG = "x" * 2_000  # 504 tokens as a row


def ctx(**changes: Any) -> ContextSettings:
    return attrs.evolve(default_settings().context, **changes)


def run(rows: Sequence[Message], *, settings: ContextSettings | None = None, **kw: Any) -> Prepared:
    return prepare_rows(rows, RequestOptions(settings=settings or ctx(), route=UNKNOWN, **kw))


def summary(text: str, through: int | None) -> Summary:
    return Summary(summary=text, updated_at=0, covers_through_id=through)


def note(text: str) -> Message:
    return Message(role="user", content=text)


def conversation(n: int, size: int = 10) -> list[StoredMessage]:
    """A leading system row, then ``n`` question-and-answer turns (ids 1, then 2-3, 4-5, ...)."""
    rows: list[Message] = [S("sys")]
    for i in range(1, n + 1):
        rows += [U(f"q{i} " + "u" * size), A(f"a{i} " + "a" * size)]
    return as_stored(rows)


def turn_rows(rows: Sequence[StoredMessage], number: int) -> list[StoredMessage]:
    return [r for r in rows if r.turn == number and r.role != "system"]


def tokens(rows: Sequence[Message]) -> int:
    return sum(row_tokens(r) for r in rows)


# --- step 2½: the summary stands in for the turns it covers ---------------------------------------


def test_coverage_at_a_turn_boundary_stands_in_for_those_turns() -> None:
    rows = conversation(4)
    through = turn_rows(rows, 2)[-1].id
    out = run(rows, summary=summary("S12", through))
    assert out.rows == (rows[0], note(SUMMARY_HEADER + "S12"), *rows[5:])
    assert (out.compacted_turns, out.compacted_messages) == (2, 4)
    assert out.trimmed is None and out.events == ()  # neither trimmed nor notified
    assert out.estimated_tokens == tokens(out.rows)


def test_coverage_inside_a_turn_covers_only_the_turns_before_it() -> None:
    rows = conversation(4)
    inside = turn_rows(rows, 3)[0].id  # the prompt of turn 3, not its reply
    out = run(rows, summary=summary("S", inside))
    assert out.rows == (rows[0], note(SUMMARY_HEADER + "S"), *rows[5:])
    assert out.compacted_turns == 2


def test_coverage_before_the_end_of_the_first_turn_covers_nothing() -> None:
    rows = conversation(3)
    out = run(rows, summary=summary("S", rows[1].id))
    assert out.rows == tuple(rows)  # no turn covered, nothing dropped: no note
    assert (out.compacted_turns, out.compacted_messages) == (0, 0)


def test_the_newest_turn_is_never_covered() -> None:
    rows = conversation(3)
    out = run(rows, summary=summary("S", rows[-1].id + 100))
    assert out.rows == (rows[0], note(SUMMARY_HEADER + "S"), *turn_rows(rows, 3))
    assert out.compacted_turns == 2
    single = conversation(1)
    assert run(single, summary=summary("S", 10**6)).rows == tuple(single)


def test_a_running_turn_with_tool_rows_is_not_covered() -> None:
    rows = as_stored([U("one"), A("one"), U("two"), A("", "c1"), T("c1")])
    out = run(rows, summary=summary("S", rows[-1].id))
    assert out.rows == (note(SUMMARY_HEADER + "S"), *rows[2:])


def test_covered_system_rows_move_up_after_the_leading_ones() -> None:
    rows = as_stored(
        [S("lead"), U("one"), S("rule 1"), A("one"), U("two"), A("two"), S("rule 2"), U("3")]
    )
    through = rows[6].id  # turn 2's last row is its system row
    out = run(rows, summary=summary("S", through))
    assert out.rows == (rows[0], rows[2], rows[6], note(SUMMARY_HEADER + "S"), rows[7])
    assert out.compacted_messages == 4  # the two moved system rows are not counted


def test_turn_zero_is_a_turn_a_summary_can_cover() -> None:
    rows = as_stored([S("lead"), A("welcome"), U("one"), A("one"), U("two")])
    out = run(rows, summary=summary("S", rows[1].id))
    assert out.rows == (rows[0], note(SUMMARY_HEADER + "S"), *rows[2:])
    assert (out.compacted_turns, out.compacted_messages) == (1, 1)


def test_covered_turns_do_not_count_as_collapsed() -> None:
    tool_turn = [U("q"), A("", "c1"), T("c1", "r"), A("done")]
    rows = as_stored([*tool_turn, *tool_turn, U("last"), A("x")])
    out = run(rows, summary=summary("S", rows[3].id), keep_tool_context_turns=0)
    assert out.compacted_turns == 1 and out.compacted_messages == 4
    assert (out.collapsed_turns, out.collapsed_tool_rows) == (1, 2)  # turn 2 only


def test_without_the_summary_the_covered_turns_come_back() -> None:
    # deleteSummary (or a truncate at or before the coverage) leaves no summary: every row is
    # sent again, since coverage lives in the summary and never in the stored rows.
    rows = conversation(3)
    assert run(rows, summary=summary("S", rows[-1].id)).compacted_turns == 2
    assert run(rows).rows == tuple(rows)


def test_a_blank_summary_stands_in_for_nothing() -> None:
    rows = conversation(3)
    out = run(rows, summary=summary(" \n", rows[-1].id))
    assert out.rows == tuple(rows)
    assert out.compacted_turns == 0


def test_rows_without_ids_are_never_covered() -> None:
    rows = [U("one"), A("one"), U("two"), A("two")]
    assert run(rows, summary=summary("S", 10**6)).rows == tuple(rows)


def test_coverage_is_a_prefix_of_the_turns() -> None:
    rows = conversation(4)
    turns = segment(rows).turns
    assert coverage(turns, turn_rows(rows, 3)[-1].id).turns == 3
    assert coverage(turns, None).turns == 0
    assert coverage(turns, 0).turns == 0


def test_turns_left_out_for_another_coverage_need_every_row() -> None:
    rows = conversation(3)
    omitted = OmittedTurns(within_limit=TurnFigures(turns=1, spoken_rows=2))
    with pytest.raises(OmittedTurnsKept):  # split without knowing of the summary's coverage
        run(rows, summary=summary("S", rows[-1].id), omitted=omitted)
    covered = OmittedTurns(covered=TurnFigures(turns=1, spoken_rows=2), covers_through_id=3)
    with pytest.raises(OmittedTurnsKept):  # split by a coverage the summary does not have
        run(rows, summary=summary("S", 5), omitted=covered)
    with pytest.raises(OmittedTurnsKept):  # no summary stands in for them
        run(rows, summary="S", omitted=attrs.evolve(covered, covers_through_id=None))


def test_covered_turns_may_be_left_out_of_the_rows() -> None:
    rows = conversation(4)
    covered = [r for r in rows if r.turn in (1, 2)]
    figures = TurnFigures(turns=2, spoken_rows=4)
    through = covered[-1].id
    left_out = OmittedTurns(covered=figures, covers_through_id=through)
    full = run(rows, summary=summary("S", through))
    windowed = run([rows[0], *rows[5:]], summary=summary("S", through), omitted=left_out)
    assert windowed == full
    assert (windowed.compacted_turns, windowed.compacted_messages) == (2, 4)


# --- step 7: the context note ---------------------------------------------------------------------


def test_note_when_turns_were_dropped_and_there_is_no_summary() -> None:
    rows = conversation(3)
    out = run(rows, settings=ctx(max_history_turns=1))
    assert out.rows == (rows[0], note(BREADCRUMB), *rows[5:])


def test_note_when_turns_were_dropped_and_the_summary_has_no_coverage() -> None:
    rows = conversation(3)
    out = run(rows, settings=ctx(max_history_turns=1), summary=summary("old", None))
    assert out.rows[1] == note(BREADCRUMB + "\n\n" + SUMMARY_HEADER + "old")
    assert out.rows == tuple(run(rows, settings=ctx(max_history_turns=1), summary="old").rows)


def test_no_note_for_a_summary_without_coverage_when_nothing_was_dropped() -> None:
    rows = conversation(3)
    assert run(rows, summary=summary("old", None)).rows == tuple(rows)


def test_note_when_a_summary_covers_turns_and_nothing_else_was_dropped() -> None:
    rows = conversation(3)
    out = run(rows, summary=summary("S", rows[2].id))
    assert out.rows[1] == note(SUMMARY_HEADER + "S")
    assert out.trimmed is None


def test_note_when_a_summary_covers_turns_and_later_turns_were_dropped() -> None:
    rows = conversation(5)
    out = run(rows, summary=summary("S", rows[2].id), settings=ctx(max_history_turns=2))
    assert out.rows == (rows[0], note(BREADCRUMB + "\n\n" + SUMMARY_HEADER + "S"), *rows[7:])
    assert out.compacted_turns == 1
    assert out.trimmed is not None
    assert (out.trimmed.dropped_turns, out.trimmed.dropped_messages) == (2, 4)


def test_a_covering_summary_that_covers_nothing_is_not_sent() -> None:
    rows = conversation(3)
    out = run(rows, summary=summary("S", rows[1].id), settings=ctx(max_history_turns=1))
    assert out.rows == (rows[0], note(BREADCRUMB), *rows[5:])


def test_a_summary_whose_turns_storage_retention_deleted_still_goes_in_the_note() -> None:
    # Turn 1 was covered, then retention deleted it: the summary now precedes every stored
    # turn. It still stands in for those turns (the model would lose both otherwise), though
    # no stored turn is compacted; nothing was dropped, so no breadcrumb.
    rows = conversation(4)
    through = turn_rows(rows, 1)[-1].id
    stored = [rows[0], *rows[3:]]  # turn 1 deleted
    out = run(stored, summary=summary("S1", through))
    assert out.rows == (rows[0], note(SUMMARY_HEADER + "S1"), *rows[3:])
    assert (out.compacted_turns, out.compacted_messages) == (0, 0)
    assert out.trimmed is None and out.events == ()
    assert out.estimated_tokens == tokens(out.rows)
    # the same with turns dropped by the turn limit: the breadcrumb, then the summary
    limited = run(stored, summary=summary("S1", through), settings=ctx(max_history_turns=1))
    crumb_and_summary = note(BREADCRUMB + "\n\n" + SUMMARY_HEADER + "S1")
    assert limited.rows == (rows[0], crumb_and_summary, *rows[-2:])
    assert limited.compacted_turns == 0


def test_system_rows_kept_by_retention_do_not_stop_a_summary_from_preceding() -> None:
    rows = as_stored([S("lead"), U("one"), S("rule"), A("one"), U("two"), A("two"), U("3")])
    stored = [r for r in rows if r.role == "system" or r.turn != 1]  # preserveSystemMessages
    out = run(stored, summary=summary("S", rows[3].id))
    assert out.rows == (rows[0], rows[2], note(SUMMARY_HEADER + "S"), *rows[4:])
    assert out.compacted_turns == 0


def test_a_summary_ending_inside_the_running_turn_is_still_not_sent() -> None:
    rows = conversation(2)
    stored = [rows[0], *rows[3:]]  # turn 1 deleted; turn 2 is the running turn
    out = run(stored, summary=summary("S", rows[3].id))  # the running turn's prompt
    assert out.rows == tuple(stored)


def test_a_preceding_summary_is_carried_into_the_compaction_request() -> None:
    rows = conversation(8, size=50)
    stored = [rows[0], *rows[5:]]  # turns 1-2 deleted, the summary covered turn 1
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(stored, settings, summary=summary("turn one", rows[2].id))
    assert out.compaction is not None
    assert out.compaction.rows[:2] == (rows[0], note(SUMMARY_HEADER + "turn one"))
    assert out.rows[:2] == out.compaction.rows[:2]
    assert out.compaction.covered_turns == 2  # turns 3-4: keepRecentTurns 4 of the 6 stored
    assert out.compaction.through_id == turn_rows(rows, 4)[-1].id


def test_uncovered_turns_left_out_need_the_oldest_row_to_place_a_summary() -> None:
    rows = conversation(4)
    stored = [rows[0], *rows[3:]]  # turn 1 deleted
    through = rows[2].id
    limited = ctx(max_history_turns=1)
    full = run(stored, summary=summary("S", through), settings=limited)
    figures = [turn_figures(turn_rows(rows, n)) for n in (2, 3)]
    left_out = OmittedTurns(
        figures[0] + figures[1], covers_through_id=through, oldest_spoken_id=rows[3].id
    )
    window = [rows[0], *rows[7:]]
    assert run(window, summary=summary("S", through), settings=limited, omitted=left_out) == full
    with pytest.raises(OmittedTurnsKept):  # without it, the note cannot be told
        run(
            window,
            summary=summary("S", through),
            settings=limited,
            omitted=attrs.evolve(left_out, oldest_spoken_id=None),
        )


def test_the_note_counts_toward_the_budget() -> None:
    rows = conversation(4, size=100)
    text = "s" * 400  # a 100-token summary
    through = rows[2].id
    bare = run(rows, summary=summary(text, through))
    assert bare.estimated_tokens == tokens(bare.rows)
    out = run(
        rows,
        summary=summary(text, through),
        settings=ctx(max_context_tokens=bare.estimated_tokens - 1),
    )
    assert out.trimmed is not None
    assert out.trimmed.tokens_before == bare.estimated_tokens
    assert out.estimated_tokens <= bare.estimated_tokens - 1
    assert out.rows[1].content.startswith(BREADCRUMB + "\n\n" + SUMMARY_HEADER)


# --- step 10: exact trim counts ------------------------------------------------------------------


def native_turn(n: int) -> list[Message]:
    return [U(f"q{n}"), A("", f"c{n}"), T(f"c{n}", f"result {n}"), A(f"answer {n}")]


def test_a_collapsed_turn_that_is_dropped_counts_all_its_rows_once() -> None:
    rows = [*native_turn(1), *native_turn(2), U("three"), A("three")]
    out = run(rows, settings=ctx(max_history_turns=1), keep_tool_context_turns=0)
    assert out.trimmed is not None
    assert (out.trimmed.dropped_turns, out.trimmed.dropped_messages) == (2, 8)
    assert (out.collapsed_turns, out.collapsed_tool_rows) == (0, 0)  # none of them is sent
    assert out.events[0].dropped_messages == 8


def test_collapse_counts_are_of_the_turns_sent() -> None:
    rows = [*native_turn(1), *native_turn(2), *native_turn(3), U("four"), A("four")]
    out = run(rows, settings=ctx(max_history_turns=3), keep_tool_context_turns=0)
    assert out.trimmed is not None
    assert out.trimmed.dropped_messages == 4
    assert (out.collapsed_turns, out.collapsed_tool_rows) == (2, 4)


def test_a_dropped_collapsed_turn_with_a_summary_row_counts_its_stored_rows() -> None:
    aborted = [U("one"), A("", "c1"), T("c1"), A("", "c2", "c3")]
    rows = [*aborted, U("two"), A("two")]
    out = run(rows, settings=ctx(max_history_turns=1), keep_tool_context_turns=0)
    assert out.trimmed is not None
    assert out.trimmed.dropped_messages == 4  # not the 2 rows the collapse would have sent
    assert out.collapsed_turns == 0


# --- when compaction is proposed --------------------------------------------------------------


def proposing(**changes: Any) -> ContextSettings:
    return ctx(compaction_max_summary_tokens=100, **changes)


def propose(rows: Sequence[Message], settings: ContextSettings, **kw: Any) -> Prepared:
    return run(rows, settings=settings, propose_compaction=True, **kw)


def test_proposed_above_the_trigger_and_not_at_it() -> None:
    rows = conversation(6, size=200)
    estimate = run(rows).estimated_tokens
    at = proposing(max_context_tokens=2 * estimate, compaction_trigger_ratio=0.5)
    assert propose(rows, at).compaction is None  # estimate == budget x 0.5: not above it
    above = proposing(max_context_tokens=2 * estimate - 2, compaction_trigger_ratio=0.5)
    assert propose(rows, above).compaction is not None


def test_the_default_trigger_is_four_fifths_of_the_budget() -> None:
    rows = conversation(6, size=200)
    extra = -run(rows).estimated_tokens % 4  # an estimate that is exactly 4/5 of a budget
    estimate = run(rows, extra_tokens=extra).estimated_tokens
    budget = estimate * 5 // 4
    assert budget * 4 == estimate * 5
    at = propose(rows, proposing(max_context_tokens=budget), extra_tokens=extra)
    assert at.compaction is None
    above = propose(rows, proposing(max_context_tokens=budget - 1), extra_tokens=extra)
    assert above.compaction is not None


def test_the_trigger_counts_what_steps_4_to_6_then_drop() -> None:
    rows = conversation(8, size=200)
    budget = tokens(rows) // 2
    settings = proposing(max_context_tokens=budget)
    out = propose(rows, settings)
    assert out.trimmed is not None  # this request is trimmed as usual
    assert out.compaction is not None  # and the next ones get a compaction
    head = tokens([rows[0], prompt_row(settings)])
    per_turn = tokens(turn_rows(rows, 1))
    fitting = min(4, (budget - 100 - head) // per_turn)
    assert fitting >= 1
    assert out.compaction.through_id == turn_rows(rows, fitting)[-1].id
    assert out.compaction.raw_estimated_tokens == head + fitting * per_turn


def test_not_proposed_without_more_uncovered_turns_than_keep_recent_turns() -> None:
    rows = conversation(4, size=400)
    tight = proposing(max_context_tokens=tokens(rows), compaction_trigger_ratio=0.1)
    assert propose(rows, tight).compaction is None  # 4 turns, keep 4
    five = conversation(5, size=400)
    out = propose(five, attrs.evolve(tight, max_context_tokens=tokens(five)))
    assert out.compaction is not None
    assert out.compaction.through_id == turn_rows(five, 1)[-1].id
    assert out.compaction.covered_turns == 1


def test_through_id_is_the_turn_before_the_newest_keep_recent_turns() -> None:
    rows = conversation(9, size=100)
    settings = proposing(
        max_context_tokens=2 * tokens(rows),
        compaction_trigger_ratio=0.1,
        compaction_keep_recent_turns=3,
    )
    out = propose(rows, settings)
    assert out.compaction is not None
    assert out.compaction.through_id == turn_rows(rows, 6)[-1].id
    assert out.compaction.covered_turns == 6


def test_keep_recent_turns_counts_uncovered_turns_only() -> None:
    rows = conversation(7, size=100)
    settings = proposing(max_context_tokens=tokens(rows), compaction_trigger_ratio=0.01)
    covered = summary("S", turn_rows(rows, 3)[-1].id)  # 4 uncovered turns: keep 4
    assert propose(rows, settings, summary=covered).compaction is None
    covered = summary("S", turn_rows(rows, 2)[-1].id)  # 5 uncovered
    out = propose(rows, settings, summary=covered)
    assert out.compaction is not None
    assert out.compaction.through_id == turn_rows(rows, 3)[-1].id
    assert out.compaction.covered_turns == 3


def test_the_span_is_lowered_turn_by_turn_to_fit() -> None:
    rows = conversation(10, size=200)
    head = tokens([rows[0], prompt_row(proposing())])
    per_turn = tokens(turn_rows(rows, 1))
    budget = 100 + head + 2 * per_turn + per_turn // 2  # room for two turns and a half
    settings = proposing(max_context_tokens=budget, compaction_trigger_ratio=0.1)
    out = propose(rows, settings)
    assert out.compaction is not None
    assert out.compaction.through_id == turn_rows(rows, 2)[-1].id
    assert out.compaction.covered_turns == 2
    assert out.compaction.raw_estimated_tokens == head + 2 * per_turn
    assert out.compaction.estimated_tokens <= budget - 100
    assert out.compaction.rows == (rows[0], *rows[1:5], prompt_row(settings))


def test_nothing_is_proposed_when_not_even_one_turn_fits() -> None:
    rows = as_stored([U(BIG), A("a"), *[r for i in range(5) for r in (U(f"q{i}"), A("a"))]])
    first = tokens(rows[:2])
    head = row_tokens(prompt_row(proposing()))
    settings = proposing(max_context_tokens=100 + head + first - 1, compaction_trigger_ratio=0.1)
    assert propose(rows, settings).compaction is None
    fits = attrs.evolve(settings, max_context_tokens=100 + head + first)
    out = propose(rows, fits)
    assert out.compaction is not None and out.compaction.covered_turns == 1


def test_nothing_is_proposed_when_the_summary_room_takes_the_budget() -> None:
    rows = conversation(8, size=100)
    settings = ctx(
        max_context_tokens=150, compaction_max_summary_tokens=150, compaction_trigger_ratio=0.1
    )
    assert propose(rows, settings).compaction is None


@pytest.mark.parametrize(
    "changes",
    [{"compaction_enabled": False}, {"max_context_tokens": 0}],
)
def test_nothing_is_proposed_when_disabled_or_without_a_budget(changes: dict[str, Any]) -> None:
    rows = conversation(8, size=400)
    settings = proposing(compaction_trigger_ratio=0.01, **{"max_context_tokens": 1_000, **changes})
    assert propose(rows, settings).compaction is None


def test_nothing_is_proposed_unless_asked() -> None:
    rows = conversation(8, size=400)
    settings = proposing(max_context_tokens=1_000, compaction_trigger_ratio=0.01)
    assert run(rows, settings=settings).compaction is None
    assert propose(rows, settings).compaction is not None


def test_a_proposal_needs_the_rows_of_omitted_turns() -> None:
    rows = conversation(8, size=400)
    settings = proposing(max_context_tokens=3_000, compaction_trigger_ratio=0.01)
    omitted = OmittedTurns(beyond_limit=TurnFigures(turns=1, spoken_rows=2, sent_tokens=10))
    with pytest.raises(OmittedTurnsKept):
        propose(rows, settings, omitted=omitted)


# --- the compaction request ---------------------------------------------------------------------


def test_the_request_is_system_rows_turns_as_sent_then_the_prompt() -> None:
    tool_turn = [U("look"), A("", "c1"), T("c1", "file"), A("seen")]
    body = [S("lead"), *tool_turn, U("two"), S("mid"), A("two"), U("three"), A("", "c9")]
    recent = [r for i in range(4) for r in (U(f"r{i}"), A(f"r{i}"))]
    rows = as_stored([*body, *recent])
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(rows, settings, keep_tool_context_turns=0)
    assert out.compaction is not None
    first, _ = collapse_turn(rows[1:5])
    assert (
        out.compaction.rows
        == (
            rows[0],
            *first,  # collapsed by step 3, as the normal request sends it
            *rows[5:8],  # a system row inside a turn stays in place
            rows[8],
            Message(role="assistant", content=COLLAPSED_EXCHANGE.format(n=1)),
            prompt_row(settings),
        )
    )
    assert out.compaction.through_id == rows[9].id
    assert out.compaction.raw_estimated_tokens == tokens(out.compaction.rows)


def test_the_request_is_swept_as_step_8_sweeps() -> None:
    rows = as_stored(
        [
            U("one"),
            A("", "c1"),  # never answered: stripped, and with no text left, removed
            U("two"),
            T("ghost", "no call"),  # answers nothing: removed
            A("two"),
            *[r for i in range(4) for r in (U(f"r{i}"), A(f"r{i}"))],
        ]
    )
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(rows, settings, keep_tool_context_turns=8)
    assert out.compaction is not None
    assert out.compaction.rows == (rows[0], rows[2], rows[4], prompt_row(settings))
    assert out.compaction.through_id == rows[4].id
    assert out.compaction.raw_estimated_tokens == tokens(out.compaction.rows)


def test_tool_exchanges_within_keep_tool_context_are_sent_whole() -> None:
    tool_turn = [U("look"), A("", "c1"), T("c1", "file"), A("seen")]
    recent = [r for i in range(2) for r in (U(f"r{i}"), A(f"r{i}"))]
    rows = as_stored([*tool_turn, *recent])
    settings = proposing(
        max_context_tokens=5_000, compaction_trigger_ratio=0.01, compaction_keep_recent_turns=2
    )
    out = propose(rows, settings, keep_tool_context_turns=8)
    assert out.compaction is not None
    assert out.compaction.rows == (*rows[:4], prompt_row(settings))


def test_the_request_is_cumulative_over_the_current_summary() -> None:
    rows = as_stored(
        [
            S("lead"),
            U("one"),
            S("rule"),
            A("one"),
            *[r for i in range(6) for r in (U(f"q{i}"), A(f"a{i}"))],
        ]
    )
    current = summary("what happened in turn 1", rows[3].id)
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(rows, settings, summary=current)
    assert out.compacted_turns == 1
    assert out.compaction is not None
    assert (
        out.compaction.rows
        == (
            rows[0],
            rows[2],  # moved up, as in the normal request: the two share their prefix
            note(SUMMARY_HEADER + "what happened in turn 1"),
            *rows[4:8],
            prompt_row(settings),
        )
    )
    assert out.rows[:3] == out.compaction.rows[:3]
    assert out.compaction.covered_turns == 3  # what the saved summary will stand in for
    assert out.compaction.through_id == rows[7].id


def test_a_summary_without_coverage_is_carried_into_the_request() -> None:
    rows = conversation(6, size=50)
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(rows, settings, summary=summary("imported", None))
    assert out.compaction is not None
    assert out.compaction.rows[:2] == (rows[0], note(SUMMARY_HEADER + "imported"))


def test_the_default_prompt_names_the_summary_room() -> None:
    row = prompt_row(ctx(compaction_max_summary_tokens=2_000))
    assert row.role == "user"
    assert row.content == DEFAULT_PROMPT.format(max_tokens="2,000")
    assert "at most 2,000 tokens" in row.content
    for words in ("goals and constraints", "decisions", "files, commands", "verbatim"):
        assert words in row.content
    assert "summary only" in row.content


def test_the_prompt_setting_replaces_the_default() -> None:
    assert prompt_row(ctx(compaction_prompt="Sum it up.")) == note("Sum it up.")
    assert prompt_row(ctx(compaction_prompt="  ")) == prompt_row(ctx())


def test_saving_the_proposal_makes_the_next_request_smaller() -> None:
    rows = conversation(12, size=300)
    settings = proposing(max_context_tokens=tokens(rows) * 2 // 3)
    first = propose(rows, settings)
    assert first.compaction is not None and first.trimmed is not None
    saved = summary("s" * 400, first.compaction.through_id)  # 100 tokens, the room allowed
    second = propose(rows, settings, summary=saved)
    assert second.compacted_turns == first.compaction.covered_turns
    assert second.trimmed is None
    assert second.estimated_tokens < tokens(rows)
    covered = {id(r) for r in rows if r.id <= first.compaction.through_id and r.role != "system"}
    assert not any(id(r) in covered for r in second.rows)
    # still above the trigger: the next proposal starts after the new coverage, on top of it
    assert second.compaction is not None
    assert second.compaction.through_id > first.compaction.through_id
    assert second.compaction.covered_turns > second.compacted_turns
    assert second.compaction.rows[1] == note(SUMMARY_HEADER + saved.summary)
    assert second.compaction.rows[2] == turn_rows(rows, first.compaction.covered_turns + 1)[0]


def test_the_proposal_estimate_is_calibrated() -> None:
    rows = conversation(8, size=100)
    settings = proposing(max_context_tokens=20_000, compaction_trigger_ratio=0.01)
    plain = propose(rows, settings)
    scaled = propose(rows, settings, calibration=Calibration(2.5, 4))
    assert plain.compaction is not None and scaled.compaction is not None
    assert scaled.compaction.raw_estimated_tokens == plain.compaction.raw_estimated_tokens
    assert scaled.compaction.estimated_tokens == -(-scaled.compaction.raw_estimated_tokens * 5 // 2)


def test_a_collapse_summary_row_marks_an_unclosed_turn_in_the_request() -> None:
    aborted = [U("go"), A("", "c1"), T("c1")]
    recent = [r for i in range(4) for r in (U(f"r{i}"), A(f"r{i}"))]
    rows = as_stored([*aborted, *recent])
    settings = proposing(max_context_tokens=5_000, compaction_trigger_ratio=0.01)
    out = propose(rows, settings, keep_tool_context_turns=0)
    assert out.compaction is not None
    assert out.compaction.rows[1] == Message(
        role="assistant", content=COLLAPSED_EXCHANGE.format(n=1)
    )
    assert out.compaction.through_id == rows[2].id
