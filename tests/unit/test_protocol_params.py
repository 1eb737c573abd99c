"""Param structuring and validation (protocol.md, "Message", "Keys", "Errors"): every malformed
param is InvalidParams whose ``field`` names it on the wire, and a well-formed Message becomes the
domain Message the manager records."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.model import Attachment, Message, ToolCall, ToolSpec
from chat_history.wire.checks import (
    MAX_MESSAGES,
    SessionWorkspace,
    check_id,
    check_int,
    check_key,
    check_text,
    parse_timestamp,
)
from chat_history.wire.messages import to_tools
from chat_history.wire.methods import history, usage
from chat_history.wire.methods.conversations import ListParams
from chat_history.wire.methods.history import (
    AppendParams,
    FormatParams,
    GetParams,
    PrepareParams,
    SaveSummaryParams,
    to_messages,
)
from chat_history.wire.protocol import structure

PNG = "iVBORw0KGgo="


def append(messages: list[dict[str, Any]] | Any, **extra: Any) -> dict[str, Any]:
    return {"conversationId": "conv-1", "messages": messages, **extra}


VALID = append(
    [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "read a.py", "timestamp": 1_764_480_000_000},
        {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.py"}}],
        },
        {"role": "tool", "content": "print(1)", "toolCallId": "call_1", "name": "read_file"},
        {
            "role": "user",
            "content": "and this",
            "attachments": [{"kind": "image", "mimeType": "image/png", "data": PNG}],
            "metadata": {"source": "panel", "n": [1, 2]},
            "providerData": {"anthropic": {"thinking": []}},
        },
    ]
)


def messages_of(params: dict[str, Any]) -> list[Message]:
    """What a handler does with an append: structure, check the key, convert the messages."""
    structured = structure(params, AppendParams)
    check_key(structured, SessionWorkspace("default-ws"))
    return to_messages(structured)


def field_of(params: Any, cls: type = AppendParams) -> str:
    with pytest.raises(InvalidParams) as caught:
        if cls is AppendParams:
            messages_of(params)
        else:
            structure(params, cls)
    assert caught.value.why
    assert caught.value.field in str(caught.value)
    return caught.value.field


def with_message(index: int, **changes: Any) -> dict[str, Any]:
    """VALID with message ``index`` changed (a value of ``...`` removes the field)."""
    params = copy.deepcopy(VALID)
    message = params["messages"][index]
    for name, value in changes.items():
        if value is ...:
            message.pop(name, None)
        else:
            message[name] = value
    return params


# -- a valid append --------------------------------------------------------------------------------


def test_a_valid_append_becomes_domain_messages() -> None:
    system, user, carrier, tool, image = messages_of(VALID)
    assert system == Message(role="system", content="You are helpful.")
    assert user.timestamp == 1_764_480_000_000
    assert carrier.content == ""
    assert carrier.tool_calls == (
        ToolCall(id="call_1", name="read_file", arguments={"path": "a.py"}),
    )
    assert (tool.role, tool.tool_call_id, tool.name) == ("tool", "call_1", "read_file")
    assert image.attachments == (Attachment(mime_type="image/png", data=PNG),)
    assert image.metadata == {"source": "panel", "n": [1, 2]}
    assert image.provider_data == {"anthropic": {"thinking": []}}
    assert image.timestamp is None


def test_key_defaults_to_the_session_workspace() -> None:
    structured = structure(VALID, AppendParams)
    assert check_key(structured, SessionWorkspace("file:///ws")) == ("file:///ws", "conv-1")
    other = structure({**VALID, "workspace": "w2"}, AppendParams)
    assert check_key(other, SessionWorkspace("file:///ws")) == ("w2", "conv-1")


def test_empty_content_is_fine() -> None:
    (message,) = messages_of(append([{"role": "user", "content": ""}]))
    assert message.content == ""


def test_arguments_as_a_json_string_are_kept_as_sent() -> None:
    call = {"id": "c", "name": "n", "arguments": '{"path": "a.py"}'}
    (message,) = messages_of(append([{"role": "assistant", "content": "", "toolCalls": [call]}]))
    assert message.tool_calls[0].arguments == '{"path": "a.py"}'


def test_missing_arguments_are_an_empty_object() -> None:
    call = {"id": "c", "name": "n"}
    (message,) = messages_of(append([{"role": "assistant", "toolCalls": [call]}]))
    assert message.tool_calls[0].arguments == {}


def test_attachment_by_uri() -> None:
    attachment = {"kind": "image", "uri": "https://example.com/a.png"}
    (message,) = messages_of(
        append([{"role": "user", "content": "x", "attachments": [attachment]}])
    )
    assert message.attachments == (Attachment(uri="https://example.com/a.png"),)


def test_limits_at_their_bounds_are_accepted() -> None:
    assert len(messages_of(append([{"role": "user", "content": "x"}] * MAX_MESSAGES))) == 1_000
    structured = structure(
        {"conversationId": "c" * 256, "messages": [{"role": "user"}]}, AppendParams
    )
    assert check_key(structured, SessionWorkspace("ws")) == ("ws", "c" * 256)


# -- timestamps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        (1_764_480_000_000, 1_764_480_000_000),
        (0, 0),
        ("2025-11-30T05:20:00Z", 1_764_480_000_000),
        ("2025-11-30T05:20:00.250Z", 1_764_480_000_250),
        ("2025-11-30T07:20:00+02:00", 1_764_480_000_000),
        ("2025-11-30T05:20:00", 1_764_480_000_000),
        ("2025-11-30", int(datetime(2025, 11, 30, tzinfo=UTC).timestamp() * 1000)),
        (None, None),
    ],
)
def test_timestamps_parse_to_epoch_milliseconds(value: Any, millis: int | None) -> None:
    assert parse_timestamp(value, "messages[0].timestamp") == millis


def test_iso_milliseconds_are_exact() -> None:
    # float arithmetic gave ...471 for this instant
    assert parse_timestamp("2004-03-15T07:55:47.472Z", "t") == 1_079_337_347_472


@settings(max_examples=300, deadline=None)
@given(millis=st.integers(0, 253_402_300_799_999), offset_minutes=st.integers(-600, 600))
def test_iso_timestamps_round_trip_to_the_millisecond(millis: int, offset_minutes: int) -> None:
    zone = timezone(timedelta(minutes=offset_minutes))
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
    try:
        text = moment.astimezone(zone).isoformat(timespec="milliseconds")
    except OverflowError:  # year 10000 in that zone
        return
    assert parse_timestamp(text, "t") == millis
    assert parse_timestamp(text.replace("+00:00", "Z"), "t") == millis


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2025-13-01T00:00:00Z",
        "",
        True,
        1.5,
        -1,
        253_402_300_800_000,
        [1],
        "1969-12-31T23:59:59.999Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59-05:00",
    ],
)
def test_bad_timestamps_name_the_field(value: Any) -> None:
    params = append(
        [{"role": "user", "content": "x"}, {"role": "user", "content": "y", "timestamp": value}]
    )
    assert field_of(params) == "messages[1].timestamp"


# -- malformed params ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        # the params object and the key
        (["not", "an", "object"], "params"),
        ({"messages": [{"role": "user", "content": "x"}]}, "conversationId"),
        (append([{"role": "user", "content": "x"}], conversationId=7), "conversationId"),
        (append([{"role": "user", "content": "x"}], conversationId=""), "conversationId"),
        (append([{"role": "user", "content": "x"}], conversationId="c" * 257), "conversationId"),
        (append([{"role": "user", "content": "x"}], conversationId="\ud800"), "conversationId"),
        (append([{"role": "user", "content": "x"}], workspace=""), "workspace"),
        (append([{"role": "user", "content": "x"}], workspace=["w"]), "workspace"),
        # the message list
        (append("hello"), "messages"),
        (append({"role": "user"}), "messages"),
        (append([]), "messages"),
        ({"conversationId": "c"}, "messages"),
        (append([{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)), "messages"),
        (append([{"role": "user", "content": "x"}, "hi"]), "messages[1]"),
        # role
        (with_message(0, role="admin"), "messages[0].role"),
        (with_message(0, role="User"), "messages[0].role"),
        (with_message(0, role=3), "messages[0].role"),
        (with_message(0, role=...), "messages[0].role"),
        # content
        (with_message(1, content=...), "messages[1].content"),
        (with_message(1, content=None), "messages[1].content"),
        (with_message(0, content=None), "messages[0].content"),
        (with_message(3, content=None), "messages[3].content"),
        (with_message(2, content=None, toolCalls=[]), "messages[2].content"),
        (with_message(1, content=42), "messages[1].content"),
        (with_message(1, content=["a"]), "messages[1].content"),
        (with_message(1, content="bad \udc00 text"), "messages[1].content"),
        # toolCallId
        (with_message(3, toolCallId=...), "messages[3].toolCallId"),
        (with_message(3, toolCallId=""), "messages[3].toolCallId"),
        (with_message(3, toolCallId=1), "messages[3].toolCallId"),
        (with_message(1, toolCallId="call_1"), "messages[1].toolCallId"),
        (with_message(2, toolCallId="call_1"), "messages[2].toolCallId"),
        # toolCalls
        (with_message(1, toolCalls=[{"id": "c", "name": "n"}]), "messages[1].toolCalls"),
        (with_message(3, toolCalls=[{"id": "c", "name": "n"}]), "messages[3].toolCalls"),
        (with_message(0, toolCalls=[{"id": "c", "name": "n"}]), "messages[0].toolCalls"),
        (with_message(2, toolCalls="read_file"), "messages[2].toolCalls"),
        (with_message(2, toolCalls=["read_file"]), "messages[2].toolCalls[0]"),
        (with_message(2, toolCalls=[{"name": "n"}]), "messages[2].toolCalls[0].id"),
        (with_message(2, toolCalls=[{"id": "", "name": "n"}]), "messages[2].toolCalls[0].id"),
        (with_message(2, toolCalls=[{"id": "c"}]), "messages[2].toolCalls[0].name"),
        (with_message(2, toolCalls=[{"id": "c", "name": 5}]), "messages[2].toolCalls[0].name"),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n"}, {"id": "c", "name": "m"}]),
            "messages[2].toolCalls",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": "path=a.py"}]),
            "messages[2].toolCalls[0].arguments",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": "[1, 2]"}]),
            "messages[2].toolCalls[0].arguments",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": 5}]),
            "messages[2].toolCalls[0].arguments",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": ["a"]}]),
            "messages[2].toolCalls[0].arguments",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": '{"x": NaN}'}]),
            "messages[2].toolCalls[0].arguments",
        ),
        (
            with_message(2, toolCalls=[{"id": "c", "name": "n", "arguments": {"x": float("inf")}}]),
            "messages[2].toolCalls[0].arguments",
        ),
        # name
        (with_message(3, name=""), "messages[3].name"),
        (with_message(3, name=7), "messages[3].name"),
        # attachments
        (with_message(4, attachments={"kind": "image"}), "messages[4].attachments"),
        (with_message(4, attachments=["img"]), "messages[4].attachments[0]"),
        (
            with_message(4, attachments=[{"kind": "image", "mimeType": "image/png", "data": "!!"}]),
            "messages[4].attachments[0].data",
        ),
        (
            with_message(
                4, attachments=[{"kind": "image", "mimeType": "image/png", "data": "abc"}]
            ),
            "messages[4].attachments[0].data",
        ),
        (
            with_message(4, attachments=[{"kind": "image", "mimeType": "image/png", "data": ""}]),
            "messages[4].attachments[0].data",
        ),
        (
            with_message(4, attachments=[{"kind": "image", "data": PNG}]),
            "messages[4].attachments[0].mimeType",
        ),
        (
            with_message(4, attachments=[{"kind": "image", "mimeType": "text/plain", "data": PNG}]),
            "messages[4].attachments[0].mimeType",
        ),
        (
            with_message(4, attachments=[{"kind": "audio", "mimeType": "image/png", "data": PNG}]),
            "messages[4].attachments[0].kind",
        ),
        (with_message(4, attachments=[{"kind": "image"}]), "messages[4].attachments[0]"),
        (
            with_message(4, attachments=[{"kind": "image", "uri": "https://x", "data": PNG}]),
            "messages[4].attachments[0]",
        ),
        (
            with_message(4, attachments=[{"kind": "image", "uri": ""}]),
            "messages[4].attachments[0].uri",
        ),
        # metadata and providerData
        (with_message(4, metadata="note"), "messages[4].metadata"),
        (with_message(4, metadata=[1, 2]), "messages[4].metadata"),
        (with_message(4, metadata=3), "messages[4].metadata"),
        (with_message(4, metadata={"x": float("nan")}), "messages[4].metadata"),
        (with_message(4, providerData="anthropic"), "messages[4].providerData"),
        (with_message(4, providerData={"gemini": float("-inf")}), "messages[4].providerData"),
    ],
)
def test_malformed_append_names_the_field(params: Any, field: str) -> None:
    assert field_of(params) == field


def test_a_bad_message_deep_in_the_list_is_named_by_its_index() -> None:
    messages = [{"role": "user", "content": "x"}] * 9 + [{"role": "robot", "content": "x"}]
    assert field_of(append(messages)) == "messages[9].role"


def test_lone_surrogate_in_tool_call_arguments() -> None:
    call = {"id": "c", "name": "n", "arguments": {"path": "\ud83d"}}
    params = append([{"role": "assistant", "content": "", "toolCalls": [call]}])
    assert field_of(params) == "messages[0].toolCalls[0].arguments"


@pytest.mark.parametrize(
    ("params", "cls", "field"),
    [
        ({"conversationId": "c", "limit": "10"}, GetParams, "limit"),
        ({"conversationId": "c", "limit": True}, GetParams, "limit"),
        ({"conversationId": "c", "limit": 2.5}, GetParams, "limit"),
        ({"conversationId": "c", "beforeId": "5"}, GetParams, "beforeId"),
        ({"conversationId": "c", "provider": 3}, FormatParams, "provider"),
        ({"conversationId": "c", "tools": {"name": "x"}}, FormatParams, "tools"),
        ({"conversationId": "c", "tools": [{"description": "x"}]}, FormatParams, "tools[0].name"),
        (
            {"conversationId": "c", "tools": [{"name": "x", "parameters": [1]}]},
            PrepareParams,
            "tools[0].parameters",
        ),
        ({"conversationId": "c", "extraTokens": "5"}, PrepareParams, "extraTokens"),
        ({"conversationId": "c", "overflowRecovery": 1}, PrepareParams, "overflowRecovery"),
        (
            {"conversationId": "c", "keepToolContextTurns": None, "model": []},
            PrepareParams,
            "model",
        ),
        ({"conversationId": "c", "summary": None}, SaveSummaryParams, "summary"),
        (
            {"conversationId": "c", "summary": "s", "coversThroughId": "1"},
            SaveSummaryParams,
            "coversThroughId",
        ),
        ({"workspace": 1}, ListParams, "workspace"),
    ],
)
def test_malformed_params_of_other_methods_name_the_field(
    params: dict[str, Any], cls: type, field: str
) -> None:
    assert field_of(params, cls) == field


def test_other_params_structure_with_camel_case_names() -> None:
    prepare = structure(
        {
            "conversationId": "c",
            "provider": "claude",
            "extraTokens": 5,
            "overflowRecovery": True,
            "keepToolContextTurns": 0,
            "tools": [{"name": "read", "parameters": {"type": "object"}}],
        },
        PrepareParams,
    )
    assert (prepare.extra_tokens, prepare.overflow_recovery, prepare.keep_tool_context_turns) == (
        5,
        True,
        0,
    )
    assert to_tools(prepare.tools) == (ToolSpec(name="read", parameters={"type": "object"}),)
    assert structure(None, ListParams) == ListParams()
    get = structure({"conversationId": "c", "limit": 10, "beforeId": 99}, GetParams)
    assert (get.limit, get.before_id) == (10, 99)


def test_tools_are_checked() -> None:
    tools = structure({"conversationId": "c", "tools": [{"name": ""}]}, FormatParams).tools
    with pytest.raises(InvalidParams) as caught:
        to_tools(tools)
    assert caught.value.field == "tools[0].name"
    many = structure({"conversationId": "c", "tools": [{"name": "t"}] * 513}, FormatParams).tools
    with pytest.raises(InvalidParams) as caught:
        to_tools(many)
    assert caught.value.field == "tools"


# -- the check functions ---------------------------------------------------------------------------


def test_check_int_bounds() -> None:
    assert check_int(None, "limit", 1, 10_000) is None
    assert check_int(1, "limit", 1, 10_000) == 1
    assert check_int(10_000, "limit", 1, 10_000) == 10_000
    for bad in (0, 10_001, -5):
        with pytest.raises(InvalidParams) as caught:
            check_int(bad, "limit", 1, 10_000)
        assert caught.value.field == "limit"
    with pytest.raises(InvalidParams):
        check_int(2**53, "beforeId", 0)


def test_check_id_and_text() -> None:
    assert check_id("x" * 256, "conversationId") == "x" * 256
    for bad in ("", "x" * 257, "a\udfffb"):
        with pytest.raises(InvalidParams) as caught:
            check_id(bad, "conversationId")
        assert caught.value.field == "conversationId"
    assert check_text("你好", "summary", 2) == "你好"
    with pytest.raises(InvalidParams) as caught:
        check_text("你好!", "summary", 2)
    assert caught.value.field == "summary"


def test_a_model_name_that_is_not_valid_unicode_is_refused_naming_model() -> None:
    """The model keys the calibration table: a lone surrogate cannot be stored (found by the
    hostile fuzzing of prepare once calibration landed)."""
    from chat_history.errors import InvalidParams
    from chat_history.wire import protocol

    for params_cls, translate in (
        (history.PrepareParams, history.prepare_options),
        (usage.ReportUsageParams, usage.usage_args),
    ):
        raw = {"conversationId": "c", "model": "\ud800", "estimatedTokens": 1, "promptTokens": 1}
        if params_cls is history.PrepareParams:
            raw = {"conversationId": "c", "model": "\ud800"}
        try:
            translate(protocol.structure(raw, params_cls))  # type: ignore[operator]
        except InvalidParams as exc:
            assert exc.field == "model"
        else:
            raise AssertionError(f"{params_cls.__name__} accepted a lone surrogate")


@pytest.mark.parametrize(
    ("domain", "wire_path"),
    [
        ("messages[3].tool_call_id", "messages[3].toolCallId"),
        ("through_id", "throughId"),
        ("covers_through_id", "coversThroughId"),
        ("new_conversation_id", "newConversationId"),
        ("keep_tool_context_turns", "keepToolContextTurns"),
        ("turns[2]", "turns[2]"),
        ("messages[0].toolCallId", "messages[0].toolCallId"),  # a wire path stays as it is
        ("provider", "provider"),
        ("", ""),
    ],
)
def test_a_domain_field_id_is_named_by_its_wire_path(domain: str, wire_path: str) -> None:
    from chat_history.wire import protocol

    assert protocol.wire_field(domain) == wire_path
    message, data = protocol.wire_error(InvalidParams(domain, "is wrong"))
    assert data == {"field": wire_path}
    assert message == (f"{wire_path}: is wrong" if wire_path else "is wrong")
