"""The linear scans that replaced quadratic regexes agree with those regexes; the cost bounds of
framing (Content-Length, object counts, depth, the id search) and the answer encoder; cut and
redacted values in messages (issue 18)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygls.protocol import JsonRPCNotification, JsonRPCResponseMessage

from chat_history.errors import InvalidParams, redact, shown
from chat_history.model import (
    MAX_JSON_DEPTH,
    Attachment,
    Message,
    StoredMessage,
    ToolCall,
    nesting_exceeds,
)
from chat_history.policy.tokens import IMAGE_MARKER, find_image_markers, row_tokens, text_tokens
from chat_history.policy.turns import tool_call_blocks
from chat_history.settings import load_settings
from chat_history.store import Key
from chat_history.store.conversation_cache import ConversationCache, row_bytes
from chat_history.wire.checks import MAX_JSON_FIELD_CHARS, check_json
from chat_history.wire.lsp import _converter
from chat_history.wire.transport import frames, framing, scan

#: How the server's protocol turns pygls's message objects into JSON.
UNSTRUCTURE = _converter().unstructure

TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
PIECES = ["[IMAGE:", "]", "\n", "x", "[", "<tool_call>", "</tool_call>", "...", "<path>", "é"]
texts = st.lists(st.sampled_from(PIECES), max_size=20).map("".join)


@settings(max_examples=600)
@given(texts)
def test_image_markers_are_found_as_the_regex_finds_them(text: str) -> None:
    expected = [(m.start(), m.end(), m.group(1)) for m in IMAGE_MARKER.finditer(text)]
    assert [tuple(m) for m in find_image_markers(text)] == expected


@settings(max_examples=600)
@given(texts)
def test_tool_call_blocks_are_found_as_the_regex_finds_them(text: str) -> None:
    assert tool_call_blocks(text) == TOOL_CALL_BLOCK.findall(text)


@settings(max_examples=500)
@given(texts)
def test_a_user_rows_estimate_leaves_out_its_markers_as_the_regex_did(text: str) -> None:
    def keep(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) in ("...", "<path>") else ""

    markers = [m for m in IMAGE_MARKER.finditer(text) if m.group(1) not in ("...", "<path>")]
    expected = text_tokens(IMAGE_MARKER.sub(keep, text)) + 4 + 1_600 * len(markers)
    assert row_tokens(Message(role="user", content=text)) == expected


def test_unclosed_markers_at_the_content_limit_scan_in_linear_time() -> None:
    # The old regexes needed hours here; these finish within the test run.
    assert find_image_markers("[IMAGE:" * 600_000) == []
    assert tool_call_blocks("<tool_call>" * 400_000) == []
    closed = "[IMAGE:a]" * 400_000
    assert len(find_image_markers(closed)) == 400_000


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=30,
)


@settings(max_examples=300)
@given(json_values, st.integers(0, 8))
def test_nesting_exceeds_agrees_with_a_recursive_depth(value: Any, limit: int) -> None:
    assert nesting_exceeds(value, limit) == (depth(value) > limit)


def containers(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(containers(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(containers(v) for v in value)
    return 0


@settings(max_examples=300)
@given(json_values, st.integers(0, 10))
def test_containers_are_counted_outside_strings(value: Any, limit: int) -> None:
    body = json.dumps({"params": value, "s": '{[\\"{['}).encode()
    assert scan.containers_over(body, limit) == (containers(value) + 1 > limit)


@settings(max_examples=500)
@given(json_values, st.one_of(st.integers(-(10**6), 10**6), st.text(max_size=5)))
def test_the_top_level_id_is_found_without_parsing(value: Any, msg_id: int | str) -> None:
    body = json.dumps({"params": value, "x": {"id": "inner"}, "id": msg_id}).encode()
    assert scan.top_level_id(body) == msg_id


def test_the_id_search_is_bounded() -> None:
    assert scan.top_level_id(b'{"a":"' + b'\\"' * 1_000_000) is None  # unclosed string
    deep = b'{"a":' + b"[" * 1_000_000 + b'],"id":5}'
    assert scan.top_level_id(deep) is None  # gave up after _ID_SEARCH_TOKENS brackets
    assert scan.top_level_id(b'{"id":7,"a":' + b"[" * 1_000_000) == 7


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"12", (12, None)),
        (b"0" * 5_000 + b"42", (42, None)),
        (b"0", (0, None)),
        (b"9" * 5_000, (framing.MAX_FRAME_BYTES + 1, None)),
        (b"1" + b"0" * 12, (framing.MAX_FRAME_BYTES + 1, None)),
        (b"-5", (None, b"-5")),
        (b"", (None, b"")),
    ],
)
def test_content_length_values_never_raise(value: bytes, expected: Any) -> None:
    assert framing.content_length(value) == expected


def test_json_fields_are_measured_compact() -> None:
    # 400,000 list items: with ", " separators the text would be 400,000 characters longer.
    value = {"k": [0] * 400_000, "s": "x" * 199_986}
    assert len(json.dumps(value, separators=(",", ":"))) == MAX_JSON_FIELD_CHARS
    assert check_json(value, "metadata") is value
    with pytest.raises(InvalidParams) as refused:
        check_json({**value, "s": "x" * 199_987}, "metadata")
    assert refused.value.field == "metadata"


def test_deep_json_is_refused_by_field_with_the_limit() -> None:
    value: Any = 1
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    assert check_json(value, "metadata") is value
    with pytest.raises(InvalidParams) as refused:
        check_json([value], "messages[2].metadata")
    assert refused.value.field == "messages[2].metadata"
    assert str(MAX_JSON_DEPTH) in refused.value.why


def test_deep_argument_strings_stored_before_the_limit_pass_on_as_text() -> None:
    deep = '{"a":' * 975 + "1" + "}" * 975
    assert ToolCall(id="c", name="t", arguments=deep).arguments_object() == {"value": deep}
    ok = '{"a":{"b":1}}'
    assert ToolCall(id="c", name="t", arguments=ok).arguments_object() == {"a": {"b": 1}}


def test_a_deep_argument_string_is_sent_alike_from_any_stack_depth() -> None:
    """The JSON parser counts its depth against Python's recursion limit: a 975-level string
    (stored before appends bounded nesting) was sent as written from a shallow stack and
    wrapped from a deep one (a prepare through the kept bodies, on the reading thread)."""
    from chat_history.providers.calls import arguments_json

    deep = '{"a":' * 975 + "1" + "}" * 975
    call = ToolCall(id="c", name="t", arguments=deep)

    def at_depth(frames: int) -> str:
        return at_depth(frames - 1) if frames else arguments_json(call)

    assert {at_depth(n) for n in (0, 20, 60)} == {deep}


def decode(body: list[bytes] | None) -> Any:
    assert body is not None
    return json.loads(b"".join(body))


def test_an_answer_that_cannot_be_encoded_becomes_an_error_under_its_id() -> None:
    circular: list[Any] = []
    circular.append(circular)
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for result in (circular, deep):
        answer = JsonRPCResponseMessage(id=4, jsonrpc="2.0", result=result)
        error = decode(frames.answer_body(answer, UNSTRUCTURE))
        assert error["id"] == 4
        assert error["error"]["code"] == -32603
    note = JsonRPCNotification(method="x", jsonrpc="2.0", params=circular)
    assert frames.answer_body(note, UNSTRUCTURE) is None  # nothing to answer


def test_answers_are_utf8_and_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = JsonRPCResponseMessage(id="a", jsonrpc="2.0", result={"t": "😀é", "s": "\ud800"})
    body = frames.answer_body(answer, UNSTRUCTURE)
    assert body is not None
    assert "😀é".encode() in b"".join(body)
    assert decode(body)["result"] == {"t": "😀é", "s": "\ud800"}  # a lone surrogate as \ud800
    monkeypatch.setattr(frames, "MAX_ANSWER_BYTES", 100)
    big = JsonRPCResponseMessage(id=9, jsonrpc="2.0", result="x" * 200)
    error = decode(frames.answer_body(big, UNSTRUCTURE))
    assert (error["id"], error["error"]["code"]) == (9, -32603)
    assert error["error"]["data"]["maxAnswerBytes"] == 100
    assert error["error"]["data"]["answerBytes"] > 200


def test_secrets_are_redacted_and_long_values_cut() -> None:
    value = {"kind": "openai", "apiKey": "sk-1", "headers": {"Authorization": "Bearer 2"}}
    assert "sk-1" not in shown(value) and "Bearer 2" not in shown(value)
    assert redact([{"token": 1, "password": 2, "x": 3}]) == [
        {"token": "<redacted>", "password": "<redacted>", "x": 3}
    ]
    long = shown("x" * 50_000_000)
    assert len(long) < 150 and "50,000,002 characters" in long
    assert len(str(InvalidParams("f", "y" * 10_000_000))) < 1_100


@pytest.mark.parametrize(
    "raw",
    [
        {"providers": {"work": {"kind": "nope", "apiKey": "sk-SECRET"}}},
        {"providers": {"work": {"provider": 5, "apiKey": "sk-SECRET"}}},
        {"providers": {"work": {"headers": {"Authorization": "sk-SECRET"}}}},
        {"maxMessages": "sk-SECRET" * 1_000_000},
    ],
)
def test_settings_warnings_never_repeat_a_secret_or_a_whole_value(raw: Any) -> None:
    problems = load_settings(raw).problems
    assert problems
    for problem in problems:
        assert problem.message().count("sk-SECRET") <= 11  # only a cut prefix of a plain value
        assert len(problem.message()) < 500
        if "providers" in raw:
            assert "sk-SECRET" not in problem.message()


def image_rows(count: int, image_chars: int, start: int = 1) -> list[StoredMessage]:
    image = Attachment(mime_type="image/png", data="A" * image_chars)
    return [
        StoredMessage(
            role="user", content="q", timestamp=0, id=i, turn=i, tokens=5, attachments=(image,)
        )
        for i in range(start, start + count)
    ]


def cached_bytes(cache: ConversationCache, keys: list[Key]) -> int:
    return sum(row_bytes(r) for k in keys for r in cache.get(k) or [])


def test_the_conversation_cache_is_bounded_in_bytes() -> None:
    cache = ConversationCache(max_conversations=64, max_rows=50_000, max_bytes=25_000_000)
    keys = [Key("w", str(n)) for n in range(4)]
    # Four conversations of two 10 MB images each: rows never bound them, bytes do.
    for key in keys:
        cache.put(key, image_rows(1, 10_000_000))
        cache.extend(key, image_rows(1, 10_000_000, start=2))
        assert cache.bytes == cached_bytes(cache, keys) <= 25_000_000
    assert [cache.get(k) is not None for k in keys] == [False, False, False, True]
    cache.remove_ids(keys[3], {1})
    assert cache.bytes == cached_bytes(cache, keys) < 11_000_000
    cache.put(Key("w", "huge"), image_rows(3, 10_000_000))  # over the budget alone: not kept
    assert cache.get(Key("w", "huge")) is None
    assert cache.bytes == cached_bytes(cache, keys)
    cache.drop(keys[3])
    assert cache.bytes == 0 and cache.rows == 0
