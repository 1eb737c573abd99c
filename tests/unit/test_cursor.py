"""listConversations paging (protocol.md "Version 2" → Conversations): the order, and cursors that
round-trip while anything the server did not hand out (under its key) is -32602 ``cursor``."""

from __future__ import annotations

import base64
import hashlib
import hmac

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

KEY = bytes(range(32))
OTHER_KEY = bytes(32)
unicode_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
positions = st.builds(
    CursorPosition,
    st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=256),
    unicode_text,
)


@given(positions)
def test_a_cursor_names_its_position_exactly(position: CursorPosition) -> None:
    cursor = encode_cursor(position, KEY)
    assert cursor.isascii()
    assert decode_cursor(cursor, KEY) == position


@given(positions)
def test_a_cursor_under_another_key_is_refused(position: CursorPosition) -> None:
    with pytest.raises(InvalidParams) as error:
        decode_cursor(encode_cursor(position, OTHER_KEY), KEY)
    assert error.value.field == "cursor"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def raw(payload: bytes) -> str:
    """A cursor over ``payload`` with a valid tag: the position checks alone must refuse it."""
    tag = hmac.new(KEY, payload, hashlib.sha256).digest()[:16]
    return f"c2.{b64(payload)}.{b64(tag)}"


VALID = encode_cursor(CursorPosition(1, "a", "w"), KEY)


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "c2.",
        "abc",
        "c1." + VALID[3:],
        "c1." + b64(b'[1,"a","w"]'),
        "c2." + b64(b'[1,"a","w"]'),
        "c2." + b64(b'[1,"a","w"]') + ".",
        VALID + "A",
        VALID + "=",
        VALID.replace(".", "A.", 1),
        VALID[:-1] + ("A" if VALID[-1] != "A" else "B"),
        "c2." + "A" * 70_000,
        "c2.!!!!.AAAA",
        "c2.ünï",
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
        raw(b'[1,"a",""]'),
        raw(b'[9223372036854775808,"a","w"]'),
        raw(b'[1,"\\ud800","w"]'),
        raw(b'[1,"a","\\udfff"]'),
        raw(b'[1,"a","' + b"w" * 4097 + b'"]'),
    ],
)
def test_a_cursor_the_server_did_not_hand_out_is_refused_naming_the_field(cursor: str) -> None:
    with pytest.raises(InvalidParams) as error:
        decode_cursor(cursor, KEY)
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
        position = decode_cursor(cursor, KEY) if cursor is not None else None
        rest = [item for item in ordered if position is None or is_after(position, *item)]
        page = rest[:limit]
        pages.extend(page)
        if len(rest) <= limit:
            break
        cursor = encode_cursor(CursorPosition(*page[-1]), KEY)
    assert pages == ordered


def is_after(
    position: CursorPosition, last_activity: int | None, conversation_id: str, workspace: str
) -> bool:
    """Whether a conversation comes after ``position`` in the listing order (a later page)."""
    here = order_key(position.last_activity, position.conversation_id, position.workspace)
    return order_key(last_activity, conversation_id, workspace) > here
