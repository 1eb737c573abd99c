"""listConversations paging (protocol.md "Version 2" → Conversations): the order, and cursors that
round-trip while anything the server did not hand out is -32602 ``cursor``."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.policy.cursor import (
    CursorPosition,
    decode_cursor,
    encode_cursor,
    order_key,
)

positions = st.builds(
    CursorPosition,
    st.one_of(st.none(), st.integers(0, 2**53)),
    st.text(min_size=1, max_size=256),
    st.text(max_size=40),
)


@given(positions)
def test_a_cursor_names_its_position_exactly(position: CursorPosition) -> None:
    cursor = encode_cursor(position)
    assert cursor.isascii()
    assert decode_cursor(cursor) == position


def raw(payload: bytes) -> str:
    return "c1." + base64.urlsafe_b64encode(payload).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "c1.",
        "abc",
        "c2." + encode_cursor(CursorPosition(1, "a", "w"))[3:],
        encode_cursor(CursorPosition(1, "a", "w")) + "A",
        encode_cursor(CursorPosition(1, "a", "w")) + "=",
        "c1.!!!!",
        "c1.ünï",
        raw(b"\xff\xfe"),
        raw(b"{}"),
        raw(b"[1,2]"),
        raw(b'[1,"a","w",4]'),
        raw(b'[true,"a","w"]'),
        raw(b'[1.5,"a","w"]'),
        raw(b'[-1,"a","w"]'),
        raw(b'[1,"","w"]'),
        raw(b'[1,"' + b"x" * 257 + b'","w"]'),
        raw(b'[1,5,"w"]'),
        raw(b'[1,"a",null]'),
        raw(b'[1, "a", "w"]'),
    ],
)
def test_a_cursor_the_server_did_not_hand_out_is_refused_naming_the_field(cursor: str) -> None:
    with pytest.raises(InvalidParams) as error:
        decode_cursor(cursor)
    assert error.value.field == "cursor"


def test_the_order_is_newest_activity_first_then_conversation_then_workspace() -> None:
    listed = [
        (5, "b", "w1"),
        (9, "z", "w1"),
        (5, "a", "w2"),
        (None, "a", "w1"),
        (5, "a", "w1"),
    ]
    assert sorted(listed, key=lambda item: order_key(*item)) == [
        (9, "z", "w1"),
        (5, "a", "w1"),
        (5, "a", "w2"),
        (5, "b", "w1"),
        (None, "a", "w1"),
    ]


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from("abc"), st.sampled_from("xy")), unique=True
    ),
    st.integers(1, 4),
)
def test_paging_by_cursor_lists_each_conversation_once_in_order(
    items: list[tuple[int, str, str]], limit: int
) -> None:
    ordered = sorted(items, key=lambda item: order_key(*item))
    pages: list[tuple[int, str, str]] = []
    cursor: str | None = None
    while True:
        position = decode_cursor(cursor) if cursor is not None else None
        rest = [item for item in ordered if position is None or is_after(position, *item)]
        page = rest[:limit]
        pages.extend(page)
        if len(rest) <= limit:
            break
        cursor = encode_cursor(CursorPosition(*page[-1]))
    assert pages == ordered


def is_after(
    position: CursorPosition, last_activity: int | None, conversation_id: str, workspace: str
) -> bool:
    """Whether a conversation comes after ``position`` in the listing order (a later page)."""
    here = order_key(position.last_activity, position.conversation_id, position.workspace)
    return order_key(last_activity, conversation_id, workspace) > here
