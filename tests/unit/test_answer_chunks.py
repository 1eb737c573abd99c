"""Issue 18 item 12: answers are encoded in chunks (frames.encode_chunks) so that a large answer
is never one ``str`` plus one ``bytes`` plus a dict per row. The chunks, joined, must be byte
for byte what one ``json.dumps`` gave (compact, UTF-8, lone surrogates as ``\\uXXXX``), and the
answer cap must still turn an answer over it into the error that says to page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygls.protocol import JsonRPCResponseMessage

from chat_history.model import Attachment, JsonText, StoredMessage, ToolCall
from chat_history.service.history import GetResult
from chat_history.wire import protocol
from chat_history.wire.methods import history
from chat_history.wire.session import _converter
from chat_history.wire.transport import frames

UNSTRUCTURE = _converter().unstructure


def plain(value: Any) -> Any:
    """The value with every JsonArray made a list (the oracle's own walk, not frames')."""
    if isinstance(value, frames.JsonArray):
        return [plain(v) for v in value]
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def expected(message: dict[str, Any]) -> bytes:
    """What the answer was before chunking: one json.dumps of the whole message."""
    text = json.dumps(plain(message), ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


# Any character, lone surrogates included (a stored string can hold one).
TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
# Keys json converts (numbers, booleans, None) besides strings.
KEYS = TEXT | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(TEXT, children, max_size=5)
        | st.dictionaries(KEYS, children, max_size=4)
        | st.lists(children, max_size=5).map(lambda items: frames.JsonArray(items, plain))
    )


JSON = st.recursive(SCALARS, containers, max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(
    result=JSON,
    msg_id=st.integers() | TEXT,
    chunk_chars=st.sampled_from([1, 7, 1_000]),
    small_values=st.sampled_from([0, 3, 512]),  # 0: always walked; 512: small ones whole
)
def test_chunks_joined_are_json_dumps_byte_for_byte(
    result: Any, msg_id: Any, chunk_chars: int, small_values: int
) -> None:
    answer = JsonRPCResponseMessage(id=msg_id, jsonrpc="2.0", result=result)
    want = expected({"id": msg_id, "jsonrpc": "2.0", "result": result})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frames, "_CHUNK_CHARS", chunk_chars)
        patch.setattr(frames, "_SMALL_VALUES", small_values)
        chunks = frames.encode_chunks(answer, UNSTRUCTURE)
        assert b"".join(chunks) == want
        body = frames.answer_body(answer, UNSTRUCTURE)
    assert body is not None
    assert b"".join(body) == want
    assert all(chunks)  # no empty writes


@settings(max_examples=200, deadline=None)
@given(result=JSON, cap=st.integers(min_value=0, max_value=400))
def test_the_answer_cap_counts_the_chunks_bytes(result: Any, cap: int) -> None:
    answer = JsonRPCResponseMessage(id=7, jsonrpc="2.0", result=result)
    want = expected({"id": 7, "jsonrpc": "2.0", "result": result})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frames, "MAX_ANSWER_BYTES", cap)
        patch.setattr(frames, "_CHUNK_CHARS", 16)
        patch.setattr(frames, "_SMALL_VALUES", 0)  # walked: the cap counts chunks
        body = frames.answer_body(answer, UNSTRUCTURE)
    assert body is not None
    if len(want) <= cap:
        assert b"".join(body) == want
        return
    error = json.loads(b"".join(body))
    assert (error["id"], error["error"]["code"]) == (7, -32603)
    assert error["error"]["data"] == {"answerBytes": len(want), "maxAnswerBytes": cap}
    assert "limit and beforeId" in error["error"]["message"]


def test_what_json_cannot_encode_fails_as_json_dumps_does() -> None:
    looped: dict[str, Any] = {"a": 1}
    looped["self"] = looped  # a cycle through the walked dicts
    inner: list[Any] = []
    inner.append(inner)  # a cycle inside one element
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]

    class Same:
        pass

    def default(o: Any) -> Any:  # json's contract: a JSON-able value, or TypeError
        if isinstance(o, Same):
            return o
        if isinstance(o, JsonRPCResponseMessage):
            return UNSTRUCTURE(o)
        raise TypeError(f"{type(o).__name__} is not JSON serializable")

    for value, error in (
        ({"x": looped}, ValueError),
        ({"x": [inner]}, ValueError),
        ([deep], RecursionError),
        ({"x": [object()]}, TypeError),
        ({"x": object()}, TypeError),
        ({"x": Same()}, ValueError),  # a default that returns the object itself
    ):
        with pytest.raises(error):
            json.dumps(value, default=default)
        with pytest.raises(error):
            frames.encode_chunks(value, default)
        answer = JsonRPCResponseMessage(id=3, jsonrpc="2.0", result=value)
        body = frames.answer_body(answer, default)
        assert body is not None
        reply = json.loads(b"".join(body))
        assert (reply["id"], reply["error"]["code"]) == (3, -32603)


def stored(n: int, text: str) -> StoredMessage:
    return StoredMessage(
        id=n,
        turn=n,
        tokens=len(text) // 4,
        role="assistant" if n % 2 else "user",
        content=text,
        tool_calls=(ToolCall(id=f"c{n}", name="t", arguments='{"q":"é"}'),) if n % 2 else (),
        attachments=(Attachment(kind="image", mime_type="image/png", data="AAAA"),)
        if n % 3 == 0
        else (),
        timestamp=1_700_000_000_000 + n,
        provider_data={"k": [n, 0.5, None]},
        metadata={"😀": {"n": n}},
    )


def test_a_get_answer_is_the_old_bytes_in_bounded_chunks_with_rows_wired_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(frames, "_CHUNK_CHARS", 64 * 1024)
    monkeypatch.setattr(frames, "_SMALL_VALUES", 0)
    rows = tuple(stored(n, f"row {n} " + "😀é中x" * (n * 997 % 4_000)) for n in range(1, 120))
    made: list[int] = []

    def counted(row: StoredMessage) -> dict[str, Any]:
        made.append(row.id)
        return protocol.wire_message(row)

    result = history.wire_get(GetResult(rows, None, None, False))
    assert isinstance(result["messages"], frames.JsonArray)
    result["messages"].convert = counted
    assert made == []  # no wire dict exists until the answer is written
    old = expected(
        {"id": 1, "jsonrpc": "2.0", "result": {**result, "messages": protocol.wire(rows)}}
    )
    made.clear()
    chunks = frames.encode_chunks(
        JsonRPCResponseMessage(id=1, jsonrpc="2.0", result=result), UNSTRUCTURE
    )
    assert made == [row.id for row in rows]
    assert b"".join(chunks) == old
    assert len(chunks) > 1
    largest_row = max(len(json.dumps(protocol.wire_message(r), ensure_ascii=False)) for r in rows)
    # Pending text is joined below 2 x _CHUNK_CHARS characters (4 bytes each at most); a
    # larger row is its own chunk. The whole answer is never one piece.
    assert max(map(len, chunks)) <= max(8 * frames._CHUNK_CHARS, 4 * largest_row)
    assert max(map(len, chunks)) < len(old) / 4


def test_a_small_answer_is_one_chunk_and_a_large_one_is_walked() -> None:
    """Issue 36: a small plain answer is encoded in one call (one chunk); past either bound
    (values, characters) it is walked in chunks as before; both the same bytes as json.dumps."""
    assert frames._is_small({"id": 1, "result": {"summary": None, "n": [1, 2.5, True, "a"]}})
    circular: list[Any] = []
    circular.append(circular)
    for large in (
        [0] * 600,
        {"text": "x" * (70 * 1024)},
        {1: "non-string key"},
        {"row": JsonText('{"a":1}')},
        circular,  # stops at the bound
    ):
        assert not frames._is_small(large)
    for result in ([{"i": i} for i in range(600)], {"text": "x" * (70 * 1024)}):
        answer = JsonRPCResponseMessage(id=2, jsonrpc="2.0", result=result)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(frames, "_CHUNK_CHARS", 1_000)
            chunks = frames.encode_chunks(answer, UNSTRUCTURE)
        assert len(chunks) > 1
        assert b"".join(chunks) == expected({"id": 2, "jsonrpc": "2.0", "result": result})
