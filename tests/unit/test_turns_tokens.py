"""Token estimates and turn segmentation (semantics.md, "Token estimate" and "Turns"): the exact
arithmetic a client's context meter reproduces, and what opens a turn or carries a tool call."""

from __future__ import annotations

import json
import math

import attrs
import pytest

from chat_history.model import Attachment, Message, StoredMessage, ToolCall, ToolSpec
from chat_history.policy.tokens import (
    IMAGE_TOKENS,
    row_tokens,
    stored_tokens,
    text_tokens,
    tool_calls_json,
    tool_schema_tokens,
)
from chat_history.policy.turns import (
    carrier_calls,
    is_in_turn_user,
    is_real_user,
    next_turn_number,
    segment,
)

PNG = Attachment(mime_type="image/png", data="iVBORw0KGgo=")


def U(text: str, *attachments: Attachment) -> Message:
    return Message(role="user", content=text, attachments=attachments)


def expected(text: str, images: int = 0) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4) + 4 + images * 1_600


# -- text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 4), ("a", 5), ("abcd", 5), ("abcde", 6), ("x" * 400, 104), ("x" * 401, 105)],
)
def test_a_row_costs_utf8_bytes_over_four_rounded_up_plus_four(text: str, tokens: int) -> None:
    for role in ("system", "user", "assistant"):
        assert row_tokens(Message(role=role, content=text)) == tokens


def test_cjk_text_is_counted_by_bytes() -> None:
    text = "你好世界"  # 12 UTF-8 bytes, 4 characters
    assert row_tokens(U(text)) == 3 + 4
    assert text_tokens(text) == 3


def test_emoji_and_accents_are_counted_by_bytes() -> None:
    assert text_tokens("é") == 1  # 2 bytes
    assert text_tokens("🙂🙂") == 2  # 8 bytes
    assert row_tokens(U("café 🙂")) == expected("café 🙂")


def test_image_tokens_constant() -> None:
    assert IMAGE_TOKENS == 1_600


# -- tool calls ------------------------------------------------------------------------------------


def test_carrier_is_priced_with_its_calls_as_compact_json() -> None:
    row = Message(
        role="assistant",
        content="Let me look.",
        tool_calls=(ToolCall(id="call_1", name="read_file", arguments={"path": "a.py"}),),
    )
    calls = '[{"id":"call_1","name":"read_file","arguments":{"path":"a.py"}}]'
    assert tool_calls_json(row.tool_calls) == calls
    assert row_tokens(row) == expected("Let me look." + calls)


def test_call_arguments_keep_their_key_order_and_non_ascii() -> None:
    calls = (ToolCall(id="c", name="w", arguments={"z": "é", "a": [1, 2]}),)
    assert tool_calls_json(calls) == '[{"id":"c","name":"w","arguments":{"z":"é","a":[1,2]}}]'


def test_string_arguments_are_priced_as_the_client_sent_them() -> None:
    calls = (ToolCall(id="c", name="w", arguments='{"a": 1}'),)
    assert tool_calls_json(calls) == '[{"id":"c","name":"w","arguments":"{\\"a\\": 1}"}]'
    row = Message(role="assistant", content="", tool_calls=calls)
    assert row_tokens(row) == expected(
        json.dumps([{"id": "c", "name": "w", "arguments": '{"a": 1}'}], separators=(",", ":"))
    )


def test_tool_call_fields_on_other_roles_are_not_priced() -> None:
    tool = Message(role="tool", content="result", tool_call_id="call_1", name="read_file")
    assert row_tokens(tool) == expected("result")


# -- images ----------------------------------------------------------------------------------------


def test_each_user_attachment_costs_1600() -> None:
    assert row_tokens(U("look", PNG)) == expected("look", images=1)
    assert row_tokens(U("look", PNG, Attachment(uri="https://x/y.png"))) == expected("look", 2)


def test_an_image_marker_in_user_text_costs_1600_and_its_text_nothing() -> None:
    assert row_tokens(U("see [IMAGE:/tmp/shot.png] here")) == expected("see  here", images=1)


def test_a_data_uri_marker_costs_1600_whatever_its_length() -> None:
    marker = "[IMAGE:data:image/png;base64," + "A" * 10_000 + "]"
    assert row_tokens(U(marker)) == expected("", images=1)


def test_markers_and_attachments_add_up() -> None:
    row = U("[IMAGE:/a.png][IMAGE:/b.png] two", PNG)
    assert row_tokens(row) == expected(" two", images=3)


@pytest.mark.parametrize("placeholder", ["[IMAGE:...]", "[IMAGE:<path>]"])
def test_placeholders_are_plain_text(placeholder: str) -> None:
    text = f"write {placeholder} to embed an image"
    assert row_tokens(U(text)) == expected(text)


def test_placeholder_next_to_a_real_marker() -> None:
    text = "use [IMAGE:<path>] like [IMAGE:/a.png]"
    assert row_tokens(U(text)) == expected("use [IMAGE:<path>] like ", images=1)


@pytest.mark.parametrize("role", ["system", "assistant"])
def test_markers_in_system_and_assistant_text_are_text(role: str) -> None:
    text = "see [IMAGE:/tmp/shot.png]"
    assert row_tokens(Message(role=role, content=text)) == expected(text)


def test_tool_row_images_are_not_in_its_stored_tokens() -> None:
    row = Message(
        role="tool",
        content="screenshot [IMAGE:/s.png]",
        tool_call_id="c1",
        attachments=(PNG,),
    )
    assert stored_tokens(row) == expected("screenshot [IMAGE:/s.png]")
    assert row_tokens(row, dispatch_tool_images=True) == expected(
        "screenshot [IMAGE:/s.png]", images=1
    )


def test_stored_tokens_of_a_user_row_count_its_images() -> None:
    assert stored_tokens(U("[IMAGE:/a.png]", PNG)) == expected("", images=2)


def test_rows_tokens_sums_rows() -> None:
    rows = [U("abcd"), Message(role="assistant", content="abcde")]
    assert sum(row_tokens(row) for row in rows) == 5 + 6


def test_tool_schema_tokens() -> None:
    tool = ToolSpec(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    text = 'read_fileRead a file{"type":"object","properties":{"path":{"type":"string"}}}'
    assert tool_schema_tokens(tool) == expected(text)
    assert tool_schema_tokens(ToolSpec(name="ping")) == expected("ping")


# -- turns -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["[Tool results] ok", "[Tool call parse error] x", "[SOP: step 1]", "[SOP:x"]
)
def test_in_turn_user_rows_do_not_open_a_turn(text: str) -> None:
    row = U(text)
    assert not is_real_user(row)
    assert is_in_turn_user(row)
    assert next_turn_number(4, row) == 4


@pytest.mark.parametrize("text", ["hello", "", "[tool results] x", " [Tool results]", "[SOP x"])
def test_other_user_rows_open_a_turn(text: str) -> None:
    row = U(text)
    assert is_real_user(row)
    assert next_turn_number(4, row) == 5


def test_only_user_rows_open_turns() -> None:
    for role in ("system", "assistant"):
        assert next_turn_number(2, Message(role=role, content="hello")) == 2
    assert next_turn_number(2, Message(role="tool", content="x", tool_call_id="c")) == 2


def test_segment_splits_leading_system_rows_turn_zero_and_turns() -> None:
    rows = [
        Message(role="system", content="rules"),
        Message(role="assistant", content="greeting"),
        U("u1"),
        U("[Tool results] r"),
        Message(role="assistant", content="a1"),
        U("u2"),
    ]
    parts = segment(rows)
    assert [r.content for r in parts.leading_system] == ["rules"]
    assert [(t.number, [r.content for r in t.rows]) for t in parts.turns] == [
        (0, ["greeting"]),
        (1, ["u1", "[Tool results] r", "a1"]),
        (2, ["u2"]),
    ]


def test_structured_calls_make_a_carrier() -> None:
    row = Message(role="assistant", content="", tool_calls=(ToolCall(id="c1", name="read"),))
    assert [(c.id, c.name) for c in carrier_calls(row, tools=["other"])] == [("c1", "read")]


def test_prompt_mode_json_carrier_counts_only_known_tools() -> None:
    row = Message(role="assistant", content='{"tool_calls": [{"name": "read", "arguments": {}}]}')
    assert bool_carrier(row)
    assert bool_carrier(row, tools=["read"])
    assert not bool_carrier(row, tools=["write"])


def test_tool_call_blocks_make_a_carrier() -> None:
    row = Message(
        role="assistant",
        content='Sure.\n<tool_call>{"name": "grep", "arguments": {"q": "x"}}</tool_call>',
    )
    assert [c.name for c in carrier_calls(row)] == ["grep"]


def test_quoted_api_trace_is_a_plain_reply() -> None:
    row = Message(
        role="assistant",
        content='The API returned {"tool_calls": [{"name": "get_weather"}]} earlier.',
    )
    assert not bool_carrier(row, tools=["read"])
    assert not bool_carrier(Message(role="user", content='{"tool_calls": [{"name": "read"}]}'))


def test_a_stored_row_is_priced_by_the_estimate_it_was_stored_with() -> None:
    picture = (Attachment(mime_type="image/png", data="AAAA"),)
    user = Message(role="user", content="look [IMAGE:a.png]", attachments=picture)
    tool = Message(role="tool", content="result", tool_call_id="c1", attachments=picture)
    for message in (user, tool):
        stored = StoredMessage.of(message, id=1, turn=1, tokens=stored_tokens(message))
        assert row_tokens(stored) == row_tokens(message) == stored.tokens
    # a tool row's images count only where dispatched, which the stored estimate leaves out
    stored_tool = StoredMessage.of(tool, id=2, turn=1, tokens=stored_tokens(tool))
    assert row_tokens(stored_tool, dispatch_tool_images=True) == stored_tool.tokens + IMAGE_TOKENS
    assert row_tokens(tool, dispatch_tool_images=True) == stored_tool.tokens + IMAGE_TOKENS


def test_a_stored_row_keeps_every_field_of_its_message() -> None:
    message = Message(
        role="assistant",
        content="text",
        tool_calls=(ToolCall(id="c1", name="read", arguments={"a": 1}),),
        tool_call_id=None,
        name="helper",
        attachments=(Attachment(uri="file:///a.png"),),
        timestamp=7,
        provider_data={"deepseek": {"reasoning_content": "r"}},
        metadata={"k": "v"},
    )
    stored = StoredMessage.of(message, id=3, turn=2, tokens=11)
    for field in attrs.fields(Message):
        assert getattr(stored, field.name) == getattr(message, field.name), field.name
    assert (stored.id, stored.turn, stored.tokens) == (3, 2, 11)
    assert StoredMessage.of(message, id=3, turn=2, tokens=11, timestamp=9).timestamp == 9


def bool_carrier(row: Message, tools: list[str] | None = None) -> bool:
    """Whether ``row`` carries a call (of ``tools``, when given)."""
    return bool(carrier_calls(row, tools))
