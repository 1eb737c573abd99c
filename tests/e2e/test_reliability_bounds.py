"""Issue 18 over the real process: received work is finished when stdin closes or on ``exit``,
every input's cost is bounded (linear scans, bounded headers, depth and object counts, cut
error messages), and every request gets an answer — UTF-8, and within the answer cap."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.conftest import servers_on
from tests.e2e.reliability import (
    KEEP_ALL,
    Server,
    assistant,
    deadline,
    frame,
    open_store,
    request_body,
    start,
    user,
)

from chat_history.model import MAX_JSON_DEPTH
from chat_history.service import history
from chat_history.store import Key
from chat_history.wire.checks import MAX_CONTENT_CHARS
from chat_history.wire.transport.scan import MAX_CONTAINERS

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

#: A hang guard, not a timing assertion: the old code needed hours for these inputs.
SLOW_ANSWER = 120.0


def pipeline(server: Server, payload: bytes, *, then_close: bool) -> list[dict[str, Any]]:
    """Write ``payload`` to stdin in one go (optionally closing stdin after it) while reading
    every message the server writes until it closes stdout."""
    messages: list[dict[str, Any]] = []

    def read() -> None:
        with contextlib.suppress(EOFError, OSError, ValueError):
            while True:
                messages.append(server.receive())

    reader = threading.Thread(target=read)
    reader.start()
    assert server.process.stdin is not None
    server.process.stdin.write(payload)
    server.process.stdin.flush()
    if then_close:
        server.process.stdin.close()
    with deadline(server, SLOW_ANSWER, "the server did not exit"):
        server.process.wait(SLOW_ANSWER)
    reader.join(30)
    return messages


def appends(first_id: int, count: int) -> bytes:
    return b"".join(
        frame(
            request_body(
                first_id + n,
                "chatHistory/append",
                {"conversationId": "c", "messages": [user(f"q{n:03d}"), assistant(f"a{n:03d}")]},
            )
        )
        for n in range(count)
    )


def stored_prompts(storage: Path, log: Path) -> list[str]:
    server = start(storage, KEEP_ALL, log=log)
    try:
        return [r["content"] for r in server.get("c") if r["role"] == "user"]
    finally:
        server.close()


def test_stdin_closed_right_after_200_pipelined_appends_stores_and_answers_all(
    tmp_path: Path,
) -> None:
    storage = tmp_path / "store"
    server = start(storage, KEEP_ALL, log=tmp_path / "first.log")
    first = server._next_id + 1
    messages = pipeline(server, appends(first, 200), then_close=True)
    answered = sorted(m["id"] - first for m in messages if "result" in m)
    assert answered == list(range(200))
    assert stored_prompts(storage, tmp_path / "second.log") == [f"q{n:03d}" for n in range(200)]


def test_exit_with_queued_appends_finishes_them_before_exiting(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    server = start(storage, KEEP_ALL, log=tmp_path / "first.log")
    first = server._next_id + 1
    exit_frame = frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode())
    messages = pipeline(server, appends(first, 100) + exit_frame, then_close=False)
    assert sorted(m["id"] - first for m in messages if "result" in m) == list(range(100))
    assert stored_prompts(storage, tmp_path / "second.log") == [f"q{n:03d}" for n in range(100)]


def test_an_unanswered_configuration_request_does_not_hold_the_exit(tmp_path: Path) -> None:
    """The client asked for workspace/configuration never answers it and closes stdin after
    its appends: the server still finishes them and exits."""
    storage = tmp_path / "store"
    server = Server(storage, tmp_path / "first.log")
    with deadline(server, 30, "initialize was not answered"):
        server.call(
            "initialize",
            {
                "processId": None,
                "capabilities": {"workspace": {"configuration": True}},
                "initializationOptions": {
                    "storagePath": str(storage),
                    "settings": KEEP_ALL,
                    "workspace": "ws",
                },
            },
        )
    first = server._next_id + 1
    initialized = frame(
        json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}).encode()
    )
    messages = pipeline(server, initialized + appends(first, 50), then_close=True)
    assert any(m.get("method") == "workspace/configuration" for m in messages)
    assert sorted(m["id"] - first for m in messages if "result" in m) == list(range(50))
    server.close()
    assert stored_prompts(storage, tmp_path / "second.log") == [f"q{n:03d}" for n in range(50)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_databases: Databases | None) -> Any:
    root = tmp_path_factory.mktemp("bounds")
    with servers_on(module_databases):
        process = start(root / "store", KEEP_ALL, log=root / "server.log")
    yield process
    process.close()


def send(server: Server, data: bytes, request_id: int | None, timeout: float = 30) -> Any:
    server.send_bytes(data)
    if request_id is None:
        return server.next_message(timeout)
    with deadline(server, timeout, f"request {request_id} was not answered"):
        return server.response(request_id)


def test_a_content_length_of_thousands_of_digits_is_answered_and_the_server_stays(
    server: Server,
) -> None:
    body = request_body(501, "chatHistory/getSummary", {"conversationId": "h"})
    # Leading zeros do not change the number: the frame is served.
    padded = b"Content-Length: " + b"0" * 5_000 + b"%d\r\n\r\n" % len(body) + body
    assert send(server, padded, 501) == {"jsonrpc": "2.0", "id": 501, "result": None}
    # A number of 5,000 digits is over the frame limit: answered, skipped, still serving.
    huge = b"Content-Length: " + b"9" * 5_000 + b"\r\n\r\n" + body
    answer = send(server, huge, None)
    assert (answer["id"], answer["error"]["code"]) == (501, -32600)
    assert len(answer["error"]["message"]) < 300
    assert server.alive()


def test_unclosed_markers_at_the_content_limit_are_stored_and_prepared(server: Server) -> None:
    images = "[IMAGE:" * (MAX_CONTENT_CHARS // len("[IMAGE:"))
    calls = "<tool_call>" * (MAX_CONTENT_CHARS // len("<tool_call>"))
    stored = server.ok(
        "chatHistory/append",
        {"conversationId": "regex", "messages": [user(images), assistant(calls)]},
        SLOW_ANSWER,
    )
    # No marker closes: the user row is plain text (no image priced) ...
    assert stored["messages"][0]["tokens"] == -(-len(images) // 4) + 4
    # ... and the turn completes (a new prompt) with the assistant row's unclosed calls.
    server.ok(
        "chatHistory/append",
        {"conversationId": "regex", "messages": [user("next")]},
        SLOW_ANSWER,
    )
    for provider in ("openai", "anthropic"):
        params = {"conversationId": "regex", "provider": provider}
        formatted = server.ok("chatHistory/format", params, SLOW_ANSWER)
        assert json.dumps(formatted["body"]).count("[IMAGE:") == len(images) // len("[IMAGE:")
        assert json.dumps(formatted["body"]).count("<tool_call>") == len(calls) // len(
            "<tool_call>"
        )
        # prepare trims the 2-million-token turn away; what matters is that it answers
        assert server.ok("chatHistory/prepare", params, SLOW_ANSWER)["estimatedTokens"] > 0


def deep_arguments(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def carrier(arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "toolCalls": [{"id": "call_1", "name": "t", "arguments": arguments}],
    }


def test_argument_strings_nested_too_deeply_are_refused_by_field(server: Server) -> None:
    answer = server.request(
        "chatHistory/append",
        {"conversationId": "deep", "messages": [user("q"), carrier(deep_arguments(975))]},
    )
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {"field": "messages[1].toolCalls[0].arguments"}
    assert str(MAX_JSON_DEPTH) in answer["error"]["message"]
    # The deepest accepted is formatted for every provider that sends arguments as an object.
    result = {"role": "tool", "toolCallId": "call_1", "content": "done"}
    server.append("deep", user("q"), carrier(deep_arguments(MAX_JSON_DEPTH)), result)
    for provider in ("anthropic", "gemini", "bedrock", "ollama"):
        body = server.ok("chatHistory/format", {"conversationId": "deep", "provider": provider})
        assert json.dumps(body).count('{"a": ') == MAX_JSON_DEPTH - 1


def test_too_many_objects_are_refused_before_parsing_and_the_server_stays(
    server: Server,
) -> None:
    many = {"m": [{}] * (MAX_CONTAINERS + 1)}
    answer = server.request(
        "chatHistory/append", {"conversationId": "many", "messages": [user("x", metadata=many)]}
    )
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {"field": "params"}
    # Brackets inside strings are text, not objects: such a request is served.
    text = "{[" * (MAX_CONTAINERS // 2 + 10)
    assert server.append("many", user(text))["messages"][0]["content"] == text
    assert server.get("many")[0]["content"] == text


def test_junk_lines_are_skipped_in_bulk(server: Server) -> None:
    junk = b"x\n" * 500_000
    body = request_body(777, "chatHistory/getSummary", {"conversationId": "junk"})
    assert send(server, junk + frame(body), 777, SLOW_ANSWER)["result"] is None


def test_a_huge_method_name_is_refused_with_the_name_cut(server: Server) -> None:
    name = "chatHistory/" + "x" * 5_000_000
    body = json.dumps({"jsonrpc": "2.0", "id": 888, "method": name, "params": {}}).encode()
    answer = send(server, frame(body), 888)
    assert answer["error"]["code"] == -32601
    assert len(answer["error"]["message"]) < 300
    assert server.alive()
    assert "x" * 1_000 not in server.stderr_text()


def test_a_huge_bad_value_is_named_not_echoed(server: Server) -> None:
    """Once cut to ~200 characters; now not quoted at all (issue 35 item 16)."""
    stamp = "2026-" + "9" * 5_000_000
    answer = server.request(
        "chatHistory/append", {"conversationId": "cut", "messages": [user("a", timestamp=stamp)]}
    )
    assert answer["error"]["data"] == {"field": "messages[0].timestamp"}
    assert len(answer["error"]["message"]) < 400
    assert "2026-9" not in answer["error"]["message"]


def read_raw(server: Server) -> tuple[int, bytes]:
    """The next frame as (Content-Length, body bytes)."""
    stdout = server.process.stdout
    assert stdout is not None
    length = -1
    while (line := stdout.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return length, stdout.read(length)


def test_answers_are_utf8_with_a_content_length_in_bytes(server: Server) -> None:
    text = "😀é中" * 10_000
    server.send_bytes(
        frame(
            request_body(
                901, "chatHistory/append", {"conversationId": "u", "messages": [user(text)]}
            )
        )
    )
    with deadline(server, 30, "append not answered"):
        length, body = read_raw(server)
    assert length == len(body)
    assert text.encode() in body
    assert b"\\ud83d" not in body
    assert json.loads(body)["result"]["messages"][0]["content"] == text


def test_an_answer_over_the_cap_is_an_error_that_says_to_page(tmp_path: Path) -> None:
    cap = 300_000
    server = start(
        tmp_path / "store",
        KEEP_ALL,
        log=tmp_path / "server.log",
        preexec=f"import chat_history.wire.transport.frames as f; f.MAX_ANSWER_BYTES = {cap}",
    )
    try:
        image = base64.b64encode(os.urandom(60_000)).decode()  # 80,000 characters a row
        for n in range(5):
            server.append(
                "big",
                user(
                    f"q{n}", attachments=[{"kind": "image", "mimeType": "image/png", "data": image}]
                ),
            )
        answer = server.request("chatHistory/get", {"conversationId": "big"})
        assert answer["error"]["code"] == -32603
        assert answer["error"]["data"]["maxAnswerBytes"] == cap
        assert answer["error"]["data"]["answerBytes"] > cap
        assert "limit" in answer["error"]["message"]
        page = server.ok("chatHistory/get", {"conversationId": "big", "limit": 2})
        assert [r["content"] for r in page["messages"]] == ["q3", "q4"]
        assert page["hasMore"] is True
        assert server.alive()
    finally:
        server.close()


def test_a_row_stored_with_deep_arguments_before_the_limit_is_still_formatted(
    tmp_path: Path,
) -> None:
    """A row written before appends bounded the depth (through the store, as an old server
    did): every provider's format is answered, the deep string passed on as text."""
    from chat_history.model import Message, ToolCall
    from chat_history.service.manager import ChatHistoryManager

    storage = tmp_path / "store"
    deep = deep_arguments(975)
    manager = ChatHistoryManager(open_store(storage))
    call = ToolCall(id="call_1", name="t", arguments=deep)
    history.append(
        manager,
        Key("ws", "old"),
        [
            Message(role="user", content="q"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="done", tool_call_id="call_1"),
        ],
    )
    del manager
    server = start(storage, KEEP_ALL, log=tmp_path / "server.log")
    try:
        for provider in ("openai", "anthropic", "gemini", "bedrock", "ollama", "cohere"):
            for method in ("chatHistory/format", "chatHistory/prepare"):
                answer = server.request(method, {"conversationId": "old", "provider": provider})
                assert "result" in answer, (provider, method, answer)
                assert json.dumps(deep) in json.dumps(answer["result"]["body"]), (provider, method)
    finally:
        server.close()
