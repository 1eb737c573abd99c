"""Edit, rewind and branch selection (protocol.md "Version 2" → Edit, rewind, branch; semantics.md
"Rewinding and turn numbers"): which rows truncate, deleteTurns and fork take, what becomes of
the summary, the turn an append continues from, and which edits are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.model import Message, StoredMessage, ToolCall
from chat_history.policy.recording import plan_append
from chat_history.policy.rewind import (
    MAX_TURNS,
    check_turns,
    edited_content,
    fork_summary_cover,
    fork_through,
    last_turn_after,
    plan_delete_turns,
    plan_truncate,
    row_by_id,
)


def stored(messages: list[Message], first_id: int = 10) -> list[StoredMessage]:
    """Rows numbered as append numbers them (ids step by 3, so ids are not positions)."""
    planned = plan_append(
        last_turn=0, current_turn_rows=[], messages=messages, max_tool_result_chars=0
    )
    return [
        StoredMessage.of(p.message, id=first_id + 3 * i, turn=p.turn, tokens=1, timestamp=i)
        for i, p in enumerate(planned)
    ]


CALL = ToolCall(id="c1", name="read_file", arguments={})
HISTORY = stored(
    [
        Message(role="system", content="be brief"),
        Message(role="assistant", content="welcome"),  # turn 0
        Message(role="user", content="one"),  # turn 1
        Message(role="assistant", content="", tool_calls=(CALL,)),
        Message(role="tool", content="file", tool_call_id="c1", name="read_file"),
        Message(role="system", content="mid-turn note"),
        Message(role="assistant", content="done"),
        Message(role="user", content="two"),  # turn 2
        Message(role="user", content="[Tool results] x"),
        Message(role="assistant", content="ok"),
        Message(role="user", content="three"),  # turn 3
    ]
)
IDS = [row.id for row in HISTORY]


def test_the_fixture_numbers_turns_as_append_does() -> None:
    assert [row.turn for row in HISTORY] == [0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 3]


def test_truncate_deletes_the_row_and_every_later_one() -> None:
    plan = plan_truncate(HISTORY, IDS[7], None)
    assert [row.id for row in plan.deleted] == IDS[7:]
    assert [row.id for row in plan.remaining] == IDS[:7]
    assert not plan.summary_deleted


@pytest.mark.parametrize(
    ("covers", "deleted"), [(None, False), (IDS[6], False), (IDS[7], True), (IDS[9], True)]
)
def test_truncate_deletes_a_summary_covering_a_deleted_row(
    covers: int | None, deleted: bool
) -> None:
    assert plan_truncate(HISTORY, IDS[7], covers).summary_deleted is deleted


@pytest.mark.parametrize("from_id", [IDS[0] - 1, IDS[0] + 1, 10_000, -1])
def test_truncate_from_an_id_that_is_not_a_row_here_is_refused(from_id: int) -> None:
    with pytest.raises(InvalidParams) as error:
        plan_truncate(HISTORY, from_id, None)
    assert error.value.field == "from_id"


def test_after_truncate_append_continues_from_the_highest_remaining_turn() -> None:
    remaining = plan_truncate(HISTORY, IDS[8], None).remaining
    assert last_turn_after(remaining) == 2
    following = plan_append(
        last_turn=last_turn_after(remaining),
        current_turn_rows=[],
        messages=[Message(role="assistant", content="again"), Message(role="user", content="q")],
        max_tool_result_chars=0,
    )
    assert [p.turn for p in following] == [2, 3]
    assert last_turn_after([]) == 0


def test_delete_turns_takes_every_row_of_the_named_turns_system_rows_included() -> None:
    plan = plan_delete_turns(HISTORY, [1])
    assert [row.id for row in plan.deleted] == IDS[2:7]
    assert any(row.role == "system" for row in plan.deleted)
    assert plan.deleted_turns == 1


def test_turn_zero_is_the_leading_system_rows_and_what_precedes_the_first_user_message() -> None:
    plan = plan_delete_turns(HISTORY, [0])
    assert [row.id for row in plan.deleted] == IDS[:2]


def test_turns_that_name_nothing_are_ignored_and_not_counted() -> None:
    plan = plan_delete_turns(HISTORY, [3, 99, 3, 2])
    assert [row.id for row in plan.deleted] == IDS[7:]
    assert plan.deleted_turns == 2
    assert plan_delete_turns(HISTORY, [42]).deleted == ()


def test_a_negative_turn_is_refused_naming_its_index() -> None:
    with pytest.raises(InvalidParams) as error:
        plan_delete_turns(HISTORY, [1, 2, -1])
    assert error.value.field == "turns[2]"


@pytest.mark.parametrize("turns", [[], list(range(MAX_TURNS + 1))])
def test_no_turns_or_more_than_a_thousand_is_refused(turns: list[int]) -> None:
    with pytest.raises(InvalidParams) as error:
        check_turns(turns)
    assert error.value.field == "turns"


def test_a_thousand_turns_are_accepted() -> None:
    assert check_turns(list(range(MAX_TURNS))) == frozenset(range(MAX_TURNS))


@given(st.lists(st.integers(0, 5), min_size=1, max_size=6))
def test_deleting_whole_turns_never_orphans_a_tool_result(turns: list[int]) -> None:
    deleted = {row.id for row in plan_delete_turns(HISTORY, turns).deleted}
    left = [row for row in HISTORY if row.id not in deleted]
    calls = {call.id for row in left for call in row.tool_calls}
    assert all(row.tool_call_id in calls for row in left if row.role == "tool")


@pytest.mark.parametrize(
    ("row", "content"),
    [(HISTORY[2], "[Tool results] now a result"), (HISTORY[8], "a real question now")],
)
def test_an_edit_flipping_whether_a_user_row_opens_a_turn_is_refused(
    row: StoredMessage, content: str
) -> None:
    with pytest.raises(InvalidParams) as error:
        edited_content(row, content, 0)
    assert error.value.field == "content"


def test_an_in_turn_user_row_may_become_another_in_turn_row() -> None:
    assert edited_content(HISTORY[8], "[SOP: still in turn", 0) == "[SOP: still in turn"


def test_an_edit_keeping_a_real_user_message_real_is_stored_as_given() -> None:
    assert edited_content(HISTORY[2], "one, fixed typo", 0) == "one, fixed typo"
    assert edited_content(HISTORY[2], "", 0) == ""


def test_an_edited_tool_result_is_cut_as_on_append() -> None:
    cut = edited_content(HISTORY[4], "x" * 1_000, 90)
    assert cut.startswith("x" * 60) and cut.endswith("x" * 30) and "truncated" in cut
    assert edited_content(HISTORY[9], "y" * 1_000, 90) == "y" * 1_000


def test_an_unknown_id_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidParams) as error:
        row_by_id(HISTORY, 4, "id")
    assert error.value.field == "id"
    assert row_by_id(HISTORY, IDS[3], "id") is HISTORY[3]


def turn_of(row_id: int) -> list[StoredMessage]:
    """The rows of ``row_id``'s turn, as fork reads them around the named row."""
    named = row_by_id(HISTORY, row_id, "id")
    return [row for row in HISTORY if row.turn == named.turn]


def test_fork_copies_through_the_named_row_else_through_the_newest() -> None:
    assert fork_through(IDS[-1], IDS[6], turn_of(IDS[6])) == IDS[6]
    assert fork_through(IDS[-1], None, []) == IDS[-1]


def test_fork_of_an_empty_source_or_through_a_missing_row_is_refused() -> None:
    with pytest.raises(InvalidParams) as error:
        fork_through(None, None, [])
    assert error.value.field == "conversation_id"
    with pytest.raises(InvalidParams) as error:
        fork_through(None, IDS[0], turn_of(IDS[0]))
    assert error.value.field == "conversation_id"
    with pytest.raises(InvalidParams) as error:
        fork_through(IDS[-1], IDS[-1] + 1, [])
    assert error.value.field == "through_id"
    with pytest.raises(InvalidParams) as error:  # a row of another turn is not around it
        fork_through(IDS[-1], IDS[-1] + 1, turn_of(IDS[-1]))
    assert error.value.field == "through_id"


def test_the_summary_is_copied_when_its_coverage_lies_within_the_copy() -> None:
    # fork through IDS[6]: the copy of the n-th source row has id 499 + n
    assert fork_summary_cover(IDS[4], IDS[6], covered_rows=5, base=499) == 504
    assert fork_summary_cover(IDS[6], IDS[6], covered_rows=7, base=499) == 506
    assert fork_summary_cover(IDS[7], IDS[6], covered_rows=8, base=499) is None
    assert fork_summary_cover(None, IDS[6], covered_rows=0, base=499) is None


def test_a_summary_covering_a_deleted_row_maps_to_the_newest_copied_row_before_it() -> None:
    # IDS[4] deleted: four source rows lie at or before it; none before IDS[0]
    assert fork_summary_cover(IDS[4], IDS[-1], covered_rows=4, base=699) == 703
    assert fork_summary_cover(IDS[0] - 1, IDS[-1], covered_rows=0, base=699) is None
