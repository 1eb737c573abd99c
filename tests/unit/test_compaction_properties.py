"""A hypothesis property of compaction (issue 15): a conversation grows turn by turn, and the
client saves a summary (no larger than ``maxSummaryTokens``) for every proposal. Then, at every
step: the compaction request fits the budget minus the summary's room; no covered turn's rows
are sent, in the request or in the compaction request; every uncovered turn that steps 4-6 did
not drop is sent whole, as step 3 sends it; and the request stays within the budget unless only
the newest turn is left."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st
from rows import as_stored
from test_context_properties import context_settings, histories, requests

from chat_history.model import Message, StoredMessage, Summary
from chat_history.policy.budget import Route
from chat_history.policy.calibration import UNCALIBRATED, Calibration
from chat_history.policy.prepare.collapse import TurnFigures, collapse_turn, turn_figures
from chat_history.policy.prepare.compaction import SUMMARY_HEADER
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions
from chat_history.policy.prepare.window import OmittedTurns
from chat_history.policy.sweep import sweep_orphans
from chat_history.policy.tokens import row_tokens
from chat_history.policy.turns import Turn, segment
from chat_history.settings import ContextSettings, default_settings

UNKNOWN = Route("openai", "openai", None, None)


@st.composite
def compaction_settings(draw: st.DrawFn) -> ContextSettings:
    return attrs.evolve(
        default_settings().context,
        max_context_tokens=draw(st.integers(150, 4_000)),
        max_history_turns=draw(st.integers(0, 8)),
        keep_tool_context_turns=draw(st.one_of(st.none(), st.integers(0, 4))),
        trim_low_water=draw(st.floats(0.5, 1.0)),
        compaction_trigger_ratio=draw(st.floats(0.05, 1.0)),
        compaction_keep_recent_turns=draw(st.integers(1, 4)),
        compaction_max_summary_tokens=draw(st.integers(100, 600)),
    )


calibrations = st.one_of(
    st.just(UNCALIBRATED), st.builds(Calibration, st.floats(0.25, 4.0), st.integers(1, 20))
)


def last_id(turn: Turn[StoredMessage]) -> int:
    return max(row.id for row in turn.rows)


def number(turn: Turn[Any]) -> int:
    first = turn.rows[0]
    return first.turn if isinstance(first, StoredMessage) else turn.number


def collapsed(turns: Sequence[Turn[Any]], index: int, keep: int, low_water: float) -> bool:
    """Whether step 3 collapses turn ``index``: one of the completed turns older than the newest
    ``keep``; below trimLowWater 1, those numbered below the stable prefix's grid line (a
    multiple of keep + 1)."""
    if low_water < 1:
        line = -(-(number(turns[-1]) - keep) // (keep + 1)) * (keep + 1)
        return index < len(turns) - 1 and number(turns[index]) < line
    return index < len(turns) - 1 - keep


def as_sent(
    turns: Sequence[Turn[StoredMessage]], index: int, keep: int, low_water: float = 1.0
) -> list[Message]:
    """Turn ``index`` as steps 3 and 8 send it (the orphan sweep repairs within a turn)."""
    rows: Sequence[Message] = turns[index].rows
    if collapsed(turns, index, keep, low_water):
        rows, _ = collapse_turn(rows)
    return sweep_orphans(rows)


def check_request(
    out: Prepared,
    rows: list[StoredMessage],
    summary: Summary | None,
    ctx: ContextSettings,
) -> int:
    """The rules for one request; returns how many turns the summary stands in for."""
    segmented = segment(rows)
    turns = segmented.turns
    through = summary.covers_through_id if summary is not None else None
    covered = 0
    if through is not None:
        while covered < len(turns) - 1 and last_id(turns[covered]) <= through:
            covered += 1
    assert out.compacted_turns == covered
    hidden = {id(r) for turn in turns[:covered] for r in turn.rows if r.role != "system"}
    assert not any(id(r) in hidden for r in out.rows)

    dropped = out.trimmed.dropped_turns if out.trimmed is not None else 0
    keep = ctx.tool_context_turns()
    sent_turns = range(covered + dropped, len(turns))
    expected_tail = [
        r for index in sent_turns for r in as_sent(turns, index, keep, ctx.trim_low_water)
    ]
    assert list(out.rows[len(out.rows) - len(expected_tail) :]) == expected_tail
    head = out.rows[: len(out.rows) - len(expected_tail)]
    system_rows = [r for r in head if r.role == "system"]
    expected_system = [
        *segmented.leading_system,
        *[r for turn in turns[: covered + dropped] for r in turn.rows if r.role == "system"],
    ]
    assert system_rows == expected_system
    notes = [r for r in head if r.role != "system"]
    assert len(notes) == (1 if covered or dropped else 0)
    if covered:
        assert notes[0].content.endswith(SUMMARY_HEADER + summary.summary)  # type: ignore[union-attr]

    budget = ctx.max_context_tokens
    assert budget is not None
    if out.estimated_tokens > budget:
        assert len(sent_turns) == 1  # only the newest turn is left
    return covered


@settings(deadline=None, max_examples=150)
@given(histories(), compaction_settings(), calibrations, st.data())
def test_with_a_summary_saved_for_every_proposal_requests_stay_sound(
    history: list[Message], ctx: ContextSettings, calibration: Calibration, data: Any
) -> None:
    rows = as_stored(history)
    turns = segment(rows).turns
    leading = len(segment(rows).leading_system)
    room = ctx.compaction_max_summary_tokens
    budget = ctx.max_context_tokens
    assert budget is not None
    summary: Summary | None = None
    end = leading
    proposals = 0
    for turn in turns:
        end += len(turn.rows)
        prefix = rows[:end]
        out = prepare_rows(
            prefix,
            RequestOptions(
                settings=ctx,
                route=UNKNOWN,
                summary=summary,
                calibration=calibration,
                propose_compaction=True,
            ),
        )
        covered = check_request(out, prefix, summary, ctx)
        proposal = out.compaction
        if proposal is None:
            continue
        proposals += 1
        assert proposal.estimated_tokens <= budget - room
        assert proposal.estimated_tokens == calibration.apply(proposal.raw_estimated_tokens)
        assert proposal.raw_estimated_tokens == sum(row_tokens(r) for r in proposal.rows)
        prefix_turns = segment(prefix).turns
        assert proposal.covered_turns > covered
        assert proposal.covered_turns <= len(prefix_turns) - ctx.compaction_keep_recent_turns
        assert proposal.through_id == last_id(prefix_turns[proposal.covered_turns - 1])
        hidden = {id(r) for t in prefix_turns[:covered] for r in t.rows if r.role != "system"}
        assert not any(id(r) in hidden for r in proposal.rows)
        # The client saves a reply no larger than the room it was given.
        chars = data.draw(st.integers(1, 4 * (room - 4) - len(SUMMARY_HEADER)), label="summary")
        text = "s" * chars
        assert row_tokens(Message(role="user", content=SUMMARY_HEADER + text)) <= room
        summary = Summary(summary=text, updated_at=0, covers_through_id=proposal.through_id)
        # The same request again, now with the summary standing in.
        after = prepare_rows(
            prefix,
            RequestOptions(
                settings=ctx,
                route=UNKNOWN,
                summary=summary,
                calibration=calibration,
                propose_compaction=True,
            ),
        )
        assert check_request(after, prefix, summary, ctx) == proposal.covered_turns
    event(f"proposals saved: {proposals if proposals < 3 else '3 or more'}")


@settings(deadline=None, max_examples=150)
@given(histories(), context_settings(), requests)
def test_trim_counts_are_exact(
    history: list[Message], ctx: ContextSettings, kw: dict[str, Any]
) -> None:
    """semantics.md step 10 (changed): ``droppedMessages`` is the dropped turns' stored rows other
    than system rows, whatever step 3 made of them; the collapse counts are of sent turns only."""
    out = prepare_rows(history, RequestOptions(settings=ctx, route=UNKNOWN, **kw))
    turns = segment(history).turns
    dropped = out.trimmed.dropped_turns if out.trimmed is not None else 0
    expected = sum(1 for t in turns[:dropped] for r in t.rows if r.role != "system")
    assert (out.trimmed.dropped_messages if out.trimmed is not None else 0) == expected
    if out.trimmed is not None:
        assert sum(e.dropped_messages for e in out.events) == expected
    keep = kw["keep_tool_context_turns"]
    keep = ctx.tool_context_turns() if keep is None else keep
    names = None if kw["tools"] is None else [t.name for t in kw["tools"]]
    removed = [
        collapse_turn(turns[i].rows, names)[1]
        if collapsed(turns, i, keep, ctx.trim_low_water)
        else 0
        for i in range(dropped, len(turns))
    ]
    assert out.collapsed_tool_rows == sum(removed)
    assert out.collapsed_turns == sum(1 for n in removed if n)


@settings(deadline=None, max_examples=150)
@given(histories(), compaction_settings(), calibrations, st.data())
def test_covered_turns_left_out_of_the_rows_answer_the_same(
    history: list[Message], ctx: ContextSettings, calibration: Calibration, data: Any
) -> None:
    """A caller may leave out the turns a summary stands in for (their system rows stay, as
    leading rows) and pass their figures instead: the request and the proposal are the same."""
    rows = as_stored(history)
    segmented = segment(rows)
    turns = segmented.turns
    if len(turns) < 2:
        return
    k = data.draw(st.integers(1, len(turns) - 1), label="covered turns")
    inside = [r.id for r in turns[k].rows[:-1]] if k < len(turns) - 1 else []
    through = data.draw(st.sampled_from([last_id(turns[k - 1]), *inside]), label="through")
    summary = Summary(summary="the gist", updated_at=0, covers_through_id=through)
    kw: dict[str, Any] = {
        "settings": ctx,
        "route": UNKNOWN,
        "summary": summary,
        "calibration": calibration,
        "propose_compaction": True,
    }
    full = prepare_rows(rows, RequestOptions(**kw))
    assert full.compacted_turns == k
    system = [
        *segmented.leading_system,
        *[r for turn in turns[:k] for r in turn.rows if r.role == "system"],
    ]
    rest = [r for turn in turns[k:] for r in turn.rows]
    figures = sum((turn_figures(turn.rows) for turn in turns[:k]), TurnFigures())
    left_out = OmittedTurns(covered=figures, covers_through_id=through)
    assert prepare_rows([*system, *rest], RequestOptions(omitted=left_out, **kw)) == full
