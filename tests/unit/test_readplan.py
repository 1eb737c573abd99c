"""The prepare read plan (policy.prepare.readplan) without a database: how far back a request reads,
how the unread turns split between the turn limit and the budget, and when their figures cannot
stand in for them (then every row is read)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from chat_history.model import Message, StoredMessage
from chat_history.policy.prepare.collapse import TurnFigures
from chat_history.policy.prepare.readplan import (
    ReadLimits,
    checked_omission,
    left_out,
    omitted_figures,
    omitted_ranges,
    read_back,
)
from chat_history.store.schema import FIGURES


def conversation(turns: int, words: int = 5) -> list[StoredMessage]:
    """``turns`` user/assistant turns, stored with consecutive ids and turn numbers from 1."""
    rows: list[StoredMessage] = []
    for turn in range(1, turns + 1):
        for role in ("user", "assistant"):
            message = Message(role=role, content=" ".join([f"{role}{turn}"] * words))
            rows.append(
                StoredMessage.of(message, id=len(rows) + 1, turn=turn, tokens=words, timestamp=0)
            )
    return rows


def newest_first(rows: list[StoredMessage]) -> list[StoredMessage]:
    return rows[::-1]


def test_a_short_conversation_is_read_whole() -> None:
    rows = conversation(3)
    back = read_back(newest_first(rows), ReadLimits(keep_turns=10, keep_tools=0, budget=0))
    assert back.whole and back.rows == rows and back.turns == 3


def test_the_turn_limit_stops_the_read_at_its_turns() -> None:
    rows = conversation(10)
    back = read_back(newest_first(rows), ReadLimits(keep_turns=3, keep_tools=0, budget=0))
    assert not back.whole
    assert [row.turn for row in back.rows] == [8, 8, 9, 9, 10, 10]
    assert back.turns == 3


def test_never_fewer_turns_than_the_tool_context_keeps() -> None:
    rows = conversation(10)
    back = read_back(newest_first(rows), ReadLimits(keep_turns=1, keep_tools=4, budget=0))
    assert back.turns == 5 and back.rows[0].turn == 6


def test_a_budget_below_what_was_read_stops_the_read() -> None:
    rows = conversation(50, words=200)
    unbounded = read_back(newest_first(rows), ReadLimits(keep_turns=100, keep_tools=0, budget=0))
    bounded = read_back(newest_first(rows), ReadLimits(keep_turns=100, keep_tools=0, budget=500))
    assert unbounded.whole
    assert not bounded.whole and 0 < bounded.turns < 50


def test_the_read_consumes_no_row_past_where_it_stops() -> None:
    consumed: list[StoredMessage] = []

    def rows() -> Iterator[StoredMessage]:
        for row in newest_first(conversation(10)):
            consumed.append(row)
            yield row

    read_back(rows(), ReadLimits(keep_turns=2, keep_tools=0, budget=0))
    assert len(consumed) == 4  # two turns: the newest rows only, nothing older fetched


def test_unread_turns_split_at_the_turn_limit() -> None:
    # Turns 1..7 unread, 3 read, the limit keeps 5: turns 6 and 7 are within it.
    assert omitted_ranges(1, 8, turns_read=3, keep_turns=5) == ((1, 5), (6, 7))
    # Everything unread is beyond a limit the read already reached.
    assert omitted_ranges(1, 8, turns_read=3, keep_turns=3) == ((1, 7), (8, 7))
    # A limit past the oldest turn leaves nothing beyond it.
    assert omitted_ranges(4, 8, turns_read=3, keep_turns=50) == ((4, 3), (4, 7))


def test_an_empty_range_is_not_looked_up_and_a_missing_one_reads_everything() -> None:
    asked: list[tuple[int, int]] = []

    def lookup(first: int, last: int) -> tuple[int, ...] | None:
        asked.append((first, last))
        return None if first == 1 else (1,) * len(FIGURES)

    assert omitted_figures([(5, 4), (5, 7)], lookup) == [TurnFigures(), TurnFigures(*[1] * 8)]
    assert asked == [(5, 7)]
    assert omitted_figures([(1, 4), (5, 7)], lookup) is None


def test_figures_that_do_not_add_up_to_the_totals_read_everything() -> None:
    beyond = TurnFigures(turns=2, spoken_rows=4, spoken_tokens=40)
    within = TurnFigures(turns=1, spoken_rows=2, spoken_tokens=20)
    kept = checked_omission(beyond, within, left_out=(6, 60), tools_given=False)
    assert kept is not None and kept.beyond_limit == beyond and kept.within_limit == within
    assert checked_omission(beyond, within, left_out=(5, 60), tools_given=False) is None
    assert checked_omission(beyond, within, left_out=(6, 61), tools_given=False) is None


def test_prompt_mode_calls_with_tool_names_read_everything() -> None:
    dependent = TurnFigures(turns=1, spoken_rows=2, spoken_tokens=20, tool_dependent=1)
    assert checked_omission(dependent, TurnFigures(), left_out=(2, 20), tools_given=True) is None
    assert checked_omission(dependent, TurnFigures(), left_out=(2, 20), tools_given=False)


def test_left_out_is_what_the_totals_hold_beyond_the_rows_read() -> None:
    rows = conversation(4)
    assert left_out(10, 100, rows[-3:]) == (7, 85)


def test_the_schema_figures_are_turn_figures_fields_in_order() -> None:
    assert tuple(field.name for field in attrs.fields(TurnFigures)) == FIGURES
