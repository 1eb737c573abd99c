"""Recording rules for ``append`` (semantics.md): a tool row answers a pending call of its own
turn, once; unanswered calls are allowed; an over-long tool result is cut head ⅔ / tail ⅓ around
an exact marker, never inside an ``[IMAGE:…]`` marker; turn numbers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rows import A, S, T, U

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.recording import (
    pending_call_ids,
    plan_append,
    truncate_tool_result,
    truncation_marker,
)
from chat_history.policy.tokens import IMAGE_MARKER, stored_tokens
from chat_history.service import history
from chat_history.store import Key

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")


def plan(*messages: Message, limit: int = 0, last_turn: int = 0, current: Sequence[Message] = ()):
    return plan_append(
        last_turn=last_turn,
        current_turn_rows=current,
        messages=messages,
        max_tool_result_chars=limit,
    )


def turns(*messages: Message) -> list[int]:
    return [row.turn for row in plan(*messages)]


def rejected(*messages: Message, **kw: Any) -> InvalidParams:
    with pytest.raises(InvalidParams) as caught:
        plan(*messages, **kw)
    return caught.value


# -- tool rows answer pending calls of their turn ------------------------------------------------


def test_tool_row_answering_no_call_is_rejected_naming_the_row() -> None:
    error = rejected(U("u"), A("a"), T("call_9"))
    assert error.field == "messages[2].tool_call_id"
    assert "answers no pending tool call" in error.why
    assert "call_9" not in error.why  # named by its field, never quoted (issue 35 item 16)


def test_tool_row_answering_an_unknown_id_is_rejected() -> None:
    error = rejected(U("u"), A("", "c1"), T("c2"))
    assert error.field == "messages[2].tool_call_id"


def test_tool_row_before_any_call_is_rejected() -> None:
    assert rejected(T("c1")).field == "messages[0].tool_call_id"


def test_tool_row_answering_a_call_of_an_earlier_turn_is_rejected() -> None:
    error = rejected(U("u1"), A("", "c1"), U("u2"), T("c1"))
    assert error.field == "messages[3].tool_call_id"


def test_tool_row_answering_a_call_of_an_earlier_append_of_an_earlier_turn_is_rejected() -> None:
    error = rejected(U("u2"), T("c1"), last_turn=1, current=[U("u1"), A("", "c1")])
    assert error.field == "messages[1].tool_call_id"


def test_tool_row_may_answer_a_call_of_an_earlier_append_in_the_same_turn() -> None:
    planned = plan(T("c1"), last_turn=1, current=[U("u1"), A("", "c1")])
    assert [(row.message.tool_call_id, row.turn) for row in planned] == [("c1", 1)]


def test_a_call_answered_twice_is_rejected() -> None:
    error = rejected(U("u"), A("", "c1"), T("c1"), T("c1"))
    assert error.field == "messages[3].tool_call_id"


def test_a_call_answered_in_an_earlier_append_cannot_be_answered_again() -> None:
    error = rejected(T("c1"), last_turn=1, current=[U("u"), A("", "c1"), T("c1")])
    assert error.field == "messages[0].tool_call_id"


def test_unanswered_calls_are_allowed() -> None:
    planned = plan(U("u1"), A("", "c1", "c2"), T("c1"), U("u2"), A("a2"))
    assert [row.turn for row in planned] == [1, 1, 1, 2, 2]


def test_results_may_come_in_any_order_and_after_in_turn_user_rows() -> None:
    planned = plan(
        U("u"), A("", "c1", "c2"), T("c2"), U("[Tool results] partial"), T("c1"), A("done")
    )
    assert [row.turn for row in planned] == [1, 1, 1, 1, 1, 1]


def test_a_later_carrier_of_the_same_turn_opens_new_calls() -> None:
    planned = plan(U("u"), A("", "c1"), T("c1"), A("", "c2"), T("c2"), A("done"))
    assert len(planned) == 6


def test_pending_call_ids_of_a_turn() -> None:
    rows = [U("u"), A("", "c1", "c2"), T("c1"), A("", "c3")]
    assert pending_call_ids(rows) == {"c2", "c3"}


def test_a_rejected_append_stores_nothing(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("", "c1")])
    with pytest.raises(InvalidParams) as caught:
        history.append(manager, KEY, [T("c1"), U("u2"), T("c1")])
    assert caught.value.field == "messages[2].tool_call_id"
    assert [row.content for row in history.get(manager, KEY).messages] == ["u1", ""]


def test_manager_accepts_a_result_in_a_later_request_of_the_same_turn(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("", "c1")])
    stored = history.append(manager, KEY, [T("c1"), A("done")]).messages
    assert [(row.role, row.turn) for row in stored] == [("tool", 1), ("assistant", 1)]


def test_manager_rejects_a_result_for_a_call_of_an_earlier_turn(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("", "c1")])
    history.append(manager, KEY, [U("u2")])
    with pytest.raises(InvalidParams) as caught:
        history.append(manager, KEY, [T("c1")])
    assert caught.value.field == "messages[0].tool_call_id"


def test_manager_keeps_pending_calls_of_the_running_turn_after_older_turns_are_pruned(
    make_manager,
) -> None:
    manager = make_manager({"maxMessages": 2})
    history.append(manager, KEY, [U("u1"), A("a1")])
    history.append(manager, KEY, [U("u2"), A("", "c1")])
    stored = history.append(manager, KEY, [T("c1")]).messages
    assert [row.content for row in history.get(manager, KEY).messages] == ["u2", "", "file text"]
    assert stored[0].turn == 2


# -- truncation ------------------------------------------------------------------------------------


def test_truncation_keeps_head_two_thirds_and_tail_one_third_with_an_exact_marker() -> None:
    content = "".join(chr(ord("a") + i % 26) for i in range(1_000))
    cut = truncate_tool_result(content, 300)
    assert cut == content[:200] + "\n\n[... 700 characters truncated ...]\n\n" + content[-100:]


def test_truncation_of_a_limit_not_divisible_by_three() -> None:
    content = "0123456789" * 20
    cut = truncate_tool_result(content, 100)
    assert cut == content[:66] + truncation_marker(100) + content[-34:]
    assert truncation_marker(100) == "\n\n[... 100 characters truncated ...]\n\n"


def test_truncation_counts_code_points_not_bytes() -> None:
    content = "你" * 50 + "好" * 50
    cut = truncate_tool_result(content, 30)
    assert cut == "你" * 20 + truncation_marker(70) + "好" * 10


def test_a_result_of_exactly_the_limit_is_kept() -> None:
    assert truncate_tool_result("x" * 300, 300) == "x" * 300
    assert truncate_tool_result("x" * 301, 300) != "x" * 301


def test_zero_limit_means_no_limit() -> None:
    assert truncate_tool_result("x" * 100_000, 0) == "x" * 100_000
    planned = plan(U("u"), A("", "c1"), T("c1", "y" * 100_000), limit=0)
    assert planned[2].message.content == "y" * 100_000


def test_truncation_never_cuts_inside_an_image_marker_at_the_head() -> None:
    marker = "[IMAGE:/tmp/screen shot.png]"
    content = "h" * 190 + marker + "m" * 500 + "t" * 100
    cut = truncate_tool_result(content, 300)
    assert cut == "h" * 190 + truncation_marker(len(content) - 190 - 100) + "t" * 100


def test_truncation_never_cuts_inside_an_image_marker_at_the_tail() -> None:
    marker = "[IMAGE:data:image/png;base64,iVBORw0KGgo=]"
    content = "h" * 200 + "m" * 500 + "t" * 80 + marker + "t" * 80
    cut = truncate_tool_result(content, 300)
    assert cut == "h" * 200 + truncation_marker(len(content) - 200 - 80) + "t" * 80


def test_truncation_keeps_an_image_marker_that_starts_the_tail_whole() -> None:
    marker = "[IMAGE:/a.png]"
    content = "h" * 700 + marker + "t" * (100 - len(marker))
    cut = truncate_tool_result(content, 300)
    assert cut == "h" * 200 + truncation_marker(500) + marker + "t" * (100 - len(marker))


def test_truncation_drops_a_marker_that_spans_both_cuts_whole() -> None:
    marker = "[IMAGE:" + "p" * 1_000 + "]"
    content = "h" * 100 + marker + "t" * 50
    cut = truncate_tool_result(content, 300)
    assert cut == "h" * 100 + truncation_marker(len(marker)) + "t" * 50


def test_only_tool_rows_are_truncated() -> None:
    long = "z" * 500
    planned = plan(S(long), U(long), A(long, "c1"), T("c1", long), limit=90)
    contents = [row.message.content for row in planned]
    assert contents[:3] == [long, long, long]
    assert contents[3] == "z" * 60 + truncation_marker(410) + "z" * 30


def test_manager_stores_the_cut_result_and_prices_it(make_manager) -> None:
    manager = make_manager({"maxToolResultChars": 30})
    stored = history.append(manager, KEY, [U("u"), A("", "c1"), T("c1", "r" * 1_000)]).messages
    expected = "r" * 20 + truncation_marker(970) + "r" * 10
    assert stored[2].content == expected
    assert stored[2].tokens == stored_tokens(T("c1", expected))
    assert history.get(manager, KEY).messages[2].content == expected


def test_manager_with_zero_limit_stores_the_whole_result(make_manager) -> None:
    manager = make_manager({"maxToolResultChars": 0})
    stored = history.append(manager, KEY, [U("u"), A("", "c1"), T("c1", "r" * 60_000)]).messages
    assert stored[2].content == "r" * 60_000


# -- turn numbers ----------------------------------------------------------------------------------


def test_leading_system_rows_are_turn_zero() -> None:
    assert turns(S(), S(), U("u1"), A("a1")) == [0, 0, 1, 1]


def test_rows_before_the_first_real_user_message_are_turn_zero() -> None:
    assert turns(S(), A("greeting"), U("[Tool results] x"), U("u1")) == [0, 0, 0, 1]


def test_in_turn_user_rows_stay_in_their_turn() -> None:
    rows = (
        U("u1"),
        A('{"tool_calls": [{"name": "read", "arguments": {}}]}'),
        U("[Tool results] read: ok"),
        U("[Tool call parse error] bad json"),
        U("[SOP: step 2] continue"),
        A("done"),
        U("u2"),
    )
    assert turns(*rows) == [1, 1, 1, 1, 1, 1, 2]


def test_in_turn_prefixes_are_exact_and_case_sensitive() -> None:
    assert turns(U("u1"), U("[tool results] x"), U(" [Tool results] x"), U("[SOP x")) == [
        1,
        2,
        3,
        4,
    ]


def test_a_system_row_after_the_first_turn_joins_the_running_turn() -> None:
    assert turns(U("u1"), S("note"), A("a1"), U("u2")) == [1, 1, 1, 2]


def test_turn_numbers_continue_from_the_last_turn() -> None:
    planned = plan(A("more"), U("next"), last_turn=7, current=[U("u7")])
    assert [row.turn for row in planned] == [7, 8]


def test_manager_numbers_turns_across_requests_and_never_renumbers(make_manager) -> None:
    manager = make_manager({"maxMessages": 2})
    history.append(manager, KEY, [S("rules"), U("u1"), A("a1")])
    history.append(manager, KEY, [U("u2")])
    history.append(manager, KEY, [A("a2"), U("u3"), A("a3")])
    assert [(row.content, row.turn) for row in history.get(manager, KEY).messages] == [
        ("rules", 0),
        ("u3", 3),
        ("a3", 3),
    ]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.text(alphabet="ab \n]", max_size=40),
            st.builds(lambda p: f"[IMAGE:{p}]", st.text(alphabet="xyz/.", min_size=1, max_size=30)),
        ),
        max_size=12,
    ),
    limit=st.integers(0, 200),
)
def test_truncation_is_exact_and_never_splits_an_image_marker(
    pieces: list[str], limit: int
) -> None:
    content = "".join(pieces)
    cut = truncate_tool_result(content, limit)
    if limit == 0 or len(content) <= limit:
        assert cut == content
        return
    found = re.fullmatch(r"(.*)\n\n\[\.\.\. (\d+) characters truncated \.\.\.\]\n\n(.*)", cut, re.S)
    assert found is not None
    head, removed, tail = found.group(1), int(found.group(2)), found.group(3)
    assert content.startswith(head) and content.endswith(tail)
    assert removed == len(content) - len(head) - len(tail) > 0
    assert len(head) <= 2 * limit // 3
    assert len(tail) <= limit - 2 * limit // 3
    cuts = (len(head), len(content) - len(tail))
    for marker in IMAGE_MARKER.finditer(content):
        assert not any(marker.start() < at < marker.end() for at in cuts)
