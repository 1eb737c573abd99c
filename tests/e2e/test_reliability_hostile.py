"""Hostile input over ONE long-lived real server process: hypothesis-generated params for every
method (wrong types, NUL and lone surrogates, huge and negative numbers, unknown fields, path and
SQL text in ids), a 10 MB message, deep nesting, and malformed frames. The server answers every
request within a deadline, every failure is -32602 naming the field (frames: -32700/-32600), it
keeps serving, and it writes nothing outside its storage folder."""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import Databases
from tests.e2e.conftest import servers_on
from tests.e2e.reliability import (
    ANSWER_SECONDS,
    KEEP_ALL,
    Server,
    deadline,
    frame,
    request_body,
    start,
    tree,
    user,
)

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

#: Every method and the params it names (a field in an error must start with one of them).
METHODS: dict[str, set[str]] = {
    "chatHistory/append": {"conversationId", "workspace", "messages"},
    "chatHistory/get": {"conversationId", "workspace", "limit", "beforeId"},
    "chatHistory/format": {"conversationId", "workspace", "provider", "model", "tools"},
    "chatHistory/prepare": {
        "conversationId",
        "workspace",
        "provider",
        "model",
        "tools",
        "extraTokens",
        "overflowRecovery",
        "keepToolContextTurns",
    },
    "chatHistory/saveSummary": {"conversationId", "workspace", "summary", "coversThroughId"},
    "chatHistory/getSummary": {"conversationId", "workspace"},
    "chatHistory/clear": {"conversationId", "workspace"},
    "chatHistory/listConversations": {"workspace", "allWorkspaces", "limit", "cursor"},
    "chatHistory/updateConversation": {"conversationId", "workspace", "title", "metadata"},
    "chatHistory/truncate": {"conversationId", "workspace", "fromId"},
    "chatHistory/deleteTurns": {"conversationId", "workspace", "turns"},
    "chatHistory/editMessage": {
        "conversationId",
        "workspace",
        "id",
        "content",
        "attachments",
        "metadata",
    },
    "chatHistory/fork": {
        "conversationId",
        "workspace",
        "newConversationId",
        "throughId",
        "newWorkspace",
    },
    "chatHistory/deleteSummary": {"conversationId", "workspace"},
}
FUZZ_EXAMPLES = 300  # per method
CASES: Counter[str] = Counter()
_ids = itertools.count(10_000_000)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def server(root: Path, module_databases: Databases | None) -> Iterator[Server]:
    (root / "cwd").mkdir(exist_ok=True)
    with servers_on(module_databases):
        process = start(root / "store", KEEP_ALL, log=root / "server.log", cwd=root / "cwd")
    yield process
    process.close()


def send_raw(server: Server, body: bytes, request_id: int | None = None) -> dict[str, Any]:
    """Send one frame; the answer to ``request_id`` (or the next message when None)."""
    CASES["requests"] += 1
    server.send_bytes(frame(body))
    if request_id is None:
        return server.next_message()
    with deadline(server, ANSWER_SECONDS, f"request {request_id} was not answered"):
        return server.response(request_id)


def raw_request(server: Server, method: str, params: Any) -> dict[str, Any]:
    request_id = next(_ids)
    return send_raw(server, request_body(request_id, method, params), request_id)


def assert_invalid(answer: dict[str, Any], field: str) -> None:
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["data"]["field"] == field, answer


def assert_success_or_named_failure(method: str, answer: dict[str, Any]) -> None:
    if "result" in answer:
        return
    error = answer["error"]
    assert error["code"] == -32602, error
    field = error["data"]["field"]
    assert isinstance(field, str) and field, error
    root_name = re.split(r"[.\[]", field, maxsplit=1)[0]
    assert root_name in METHODS[method] | {"params"}, error


# -- strategies --------------------------------------------------------------------------------

SPECIAL_TEXT = [
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "../../escaped",
    "..\\..\\escaped",
    "/etc/passwd",
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    "%s%n%x",
    "\u202e\ufeff",
    "😀" * 3,
    " " * 300,
]
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(SPECIAL_TEXT),
    st.lists(st.one_of(st.characters(), surrogates), max_size=8).map("".join),
)
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**53 - 1, 2**53, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes any JSON at all."""
    return st.one_of(good, good, json_values)


ids = either(st.one_of(st.sampled_from(["c1", "c2", "ws"]), texts))
small_ints = either(st.one_of(st.integers(-5, 20_000), numbers))
base64_text = st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode())
tool_calls = st.lists(
    st.fixed_dictionaries(
        {"id": either(st.sampled_from(["call_1", "call_2"])), "name": either(texts)},
        optional={
            "arguments": either(
                st.one_of(st.dictionaries(texts, json_values, max_size=3), texts, st.just("{}"))
            )
        },
    ),
    max_size=3,
)
attachments = st.lists(
    st.fixed_dictionaries(
        {"kind": either(st.just("image"))},
        optional={
            "mimeType": either(st.sampled_from(["image/png", "image/jpeg", "text/html"])),
            "data": either(base64_text),
            "uri": either(st.sampled_from(["https://example.com/a.png", "file:///etc/passwd"])),
        },
    ),
    max_size=2,
)
messages = st.fixed_dictionaries(
    {"role": either(st.sampled_from(["system", "user", "assistant", "tool"]))},
    optional={
        "content": either(st.one_of(texts, st.none())),
        "toolCalls": either(tool_calls),
        "toolCallId": either(st.sampled_from(["call_1", "call_2"])),
        "name": either(texts),
        "attachments": either(attachments),
        "timestamp": either(
            st.one_of(
                numbers,
                st.sampled_from(["2026-11-30T10:00:00Z", "0001-01-01T00:00:00+23:59", "9999"]),
                texts,
            )
        ),
        "providerData": either(st.dictionaries(texts, json_values, max_size=3)),
        "metadata": either(st.dictionaries(texts, json_values, max_size=3)),
        "unknownField": json_values,
    },
)
tools = st.lists(
    st.fixed_dictionaries(
        {"name": either(texts)},
        optional={
            "description": either(texts),
            "parameters": either(st.dictionaries(texts, json_values, max_size=3)),
        },
    ),
    max_size=3,
)
providers = either(st.sampled_from(["openai", "anthropic", "gemini", "bedrock", "nope"]))
unknown_fields = st.dictionaries(
    texts.filter(lambda k: k not in set().union(*METHODS.values())), json_values, max_size=2
)

KEYS = {"conversationId": ids, "workspace": ids}
PARAMS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "chatHistory/append": {**KEYS, "messages": either(st.lists(messages, min_size=1, max_size=4))},
    "chatHistory/get": {**KEYS, "limit": small_ints, "beforeId": small_ints},
    "chatHistory/format": {**KEYS, "provider": providers, "model": ids, "tools": either(tools)},
    "chatHistory/prepare": {
        **KEYS,
        "provider": providers,
        "model": ids,
        "tools": either(tools),
        "extraTokens": small_ints,
        "overflowRecovery": either(st.booleans()),
        "keepToolContextTurns": small_ints,
    },
    "chatHistory/saveSummary": {**KEYS, "summary": either(texts), "coversThroughId": small_ints},
    "chatHistory/getSummary": KEYS,
    "chatHistory/clear": KEYS,
    "chatHistory/listConversations": {
        "workspace": ids,
        "allWorkspaces": either(st.booleans()),
        "limit": small_ints,
        "cursor": either(st.sampled_from(["c1.WzEsImMxIiwid3MiXQ", "c1.", "nope"])),
    },
    "chatHistory/updateConversation": {
        **KEYS,
        "title": either(st.one_of(texts, st.none())),
        "metadata": either(st.dictionaries(texts, json_values, max_size=3)),
    },
    "chatHistory/truncate": {**KEYS, "fromId": small_ints},
    "chatHistory/deleteTurns": {**KEYS, "turns": either(st.lists(small_ints, max_size=4))},
    "chatHistory/editMessage": {
        **KEYS,
        "id": small_ints,
        "content": either(texts),
        "attachments": either(attachments),
        "metadata": either(st.dictionaries(texts, json_values, max_size=3)),
    },
    "chatHistory/fork": {
        **KEYS,
        "newConversationId": ids,
        "throughId": small_ints,
        "newWorkspace": ids,
    },
    "chatHistory/deleteSummary": KEYS,
}


def params_for(method: str) -> st.SearchStrategy[Any]:
    fields = PARAMS[method]
    required = {"conversationId"} & set(fields)
    shaped = st.builds(
        lambda known, extra: {**extra, **known},
        st.fixed_dictionaries(
            {k: v for k, v in fields.items() if k in required},
            optional={k: v for k, v in fields.items() if k not in required},
        ),
        unknown_fields,
    )
    return st.one_of(shaped, shaped, shaped, json_values)


# -- fuzzing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(METHODS))
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_fuzzed_params_get_a_result_or_a_32602_naming_the_field(
    server: Server, method: str, data: st.DataObject
) -> None:
    params = data.draw(params_for(method))
    answer = raw_request(server, method, params)
    assert_success_or_named_failure(method, answer)
    CASES[
        "fuzzed, answered with a result" if "result" in answer else "fuzzed, answered -32602"
    ] += 1


finite_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=texts.filter(lambda t: 0 < len(t) <= 256),
    sent=st.lists(
        st.fixed_dictionaries(
            {"role": st.just("user"), "content": texts},
            optional={"metadata": st.dictionaries(texts, finite_json, max_size=3)},
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_fuzzed_text_is_stored_exactly_or_refused_by_field(
    server: Server, conversation: str, sent: list[dict[str, Any]]
) -> None:
    """Well-formed appends of hostile text (NUL, lone surrogates, paths, SQL): stored and read
    back exactly, or, when the text is not valid Unicode, refused naming where."""
    answer = raw_request(
        server, "chatHistory/append", {"conversationId": conversation, "messages": sent}
    )
    # What the server reads: \u escapes of a surrogate pair decode to one valid character.
    conversation, sent = json.loads(json.dumps([conversation, sent]))
    # A conversation id holding NUL is refused (version 5: the store keys a conversation's other
    # branches by its id and a NUL, which no client may name).
    bad = ["conversationId"] if _has_surrogate(conversation) or "\x00" in conversation else []
    for i, message in enumerate(sent):
        bad += [
            f"messages[{i}].{k}" for k in ("content", "metadata") if _has_surrogate(message.get(k))
        ]
    if bad:
        assert "error" in answer and answer["error"]["code"] == -32602, answer
        assert answer["error"]["data"]["field"] in bad, (answer, bad)
        CASES["fuzzed, answered -32602"] += 1
        return
    assert "result" in answer, answer
    rows = server.get(conversation)[-len(sent) :]
    assert [(r["content"], r["metadata"]) for r in rows] == [
        (m["content"], m.get("metadata", {})) for m in sent
    ]
    CASES["fuzzed, answered with a result"] += 1


# -- chosen cases ------------------------------------------------------------------------------


def test_a_10_mb_message_is_refused_by_field_and_a_10_mb_image_is_kept(server: Server) -> None:
    huge = "x" * 10_000_000
    answer = raw_request(
        server, "chatHistory/append", {"conversationId": "big", "messages": [user(huge)]}
    )
    assert_invalid(answer, "messages[0].content")
    image = base64.b64encode(b"\x89PNG" + bytes(7_500_000)).decode()  # 10 MB of base64
    attachment = {"kind": "image", "mimeType": "image/png", "data": image}
    stored = server.append("big", user("look", attachments=[attachment]))
    assert stored["messages"][0]["attachments"][0]["data"] == image
    assert server.get("big")[0]["attachments"][0]["data"] == image
    assert server.ok("chatHistory/clear", {"conversationId": "big"})["deletedMessages"] == 1


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def test_deep_nesting_is_refused_by_field_and_moderate_nesting_kept(server: Server) -> None:
    ok = server.append("deep", user("hi", metadata=nested(150)))
    assert ok["messages"][0]["metadata"] == nested(150)
    answer = raw_request(
        server,
        "chatHistory/append",
        {"conversationId": "deep", "messages": [user("x", metadata=nested(400))]},
    )
    assert_invalid(answer, "messages[0].metadata")
    # Deeper than Python's JSON parser goes: the id is still found and answered.
    request_id = next(_ids)
    body = (
        b'{"jsonrpc":"2.0","id":%d,"method":"chatHistory/get","params":{"conversationId":"deep",'
        b'"x":' % request_id + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    )
    assert_invalid(send_raw(server, body, request_id), "params")
    # A tool-call argument string is parsed by the server: its depth is bounded too.
    for depth in (900, 985):
        arguments = '{"a":' * depth + "1" + "}" * depth
        carrier = {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": "call_1", "name": "t", "arguments": arguments}],
        }
        answer = raw_request(
            server,
            "chatHistory/append",
            {"conversationId": f"deep-args-{depth}", "messages": [user("q"), carrier]},
        )
        assert_success_or_named_failure("chatHistory/append", answer)
        for provider in ("openai", "openai-responses", "anthropic", "gemini", "bedrock", "cohere"):
            for method in ("chatHistory/format", "chatHistory/prepare"):
                params = {"conversationId": f"deep-args-{depth}", "provider": provider}
                assert_success_or_named_failure(method, raw_request(server, method, params))


def test_numbers_too_large_for_any_field_are_refused_by_field(server: Server) -> None:
    request_id = next(_ids)
    body = (
        b'{"jsonrpc":"2.0","id":%d,"method":"chatHistory/get","params":{"conversationId":"n",'
        b'"limit":%s}}' % (request_id, b"9" * 5_000)
    )
    assert_invalid(send_raw(server, body, request_id), "limit")
    for field, value in (("limit", -1), ("limit", 2**64), ("beforeId", -(2**63)), ("limit", 1.5)):
        answer = raw_request(server, "chatHistory/get", {"conversationId": "n", field: value})
        assert_invalid(answer, field)
    answer = raw_request(
        server,
        "chatHistory/append",
        {"conversationId": "n", "messages": [user("t", timestamp=10**20)]},
    )
    assert_invalid(answer, "messages[0].timestamp")


def test_nul_text_round_trips_and_lone_surrogates_are_refused_by_field(server: Server) -> None:
    text = "before\x00after"
    stored = server.append("nul-text", user(text, metadata={text: text}, name=text))
    assert stored["messages"][0]["content"] == text
    row = server.get("nul-text")[0]
    assert (row["content"], row["metadata"], row["name"]) == (text, {text: text}, text)
    for params, field in (
        ({"conversationId": "s", "messages": [user("a\ud800b")]}, "messages[0].content"),
        ({"conversationId": "\udfff", "messages": [user("a")]}, "conversationId"),
        ({"conversationId": "s", "workspace": "\ud800", "messages": [user("a")]}, "workspace"),
        (
            {"conversationId": "s", "messages": [user("a", metadata={"\ud800": 1})]},
            "messages[0].metadata",
        ),
    ):
        body = request_body(0, "chatHistory/append", params)
        assert b"\\ud8" in body or b"\\udf" in body  # sent as escapes, as a client would
        assert_invalid(raw_request(server, "chatHistory/append", params), field)
    # NUL is text, but not in a conversation id (version 5), refused naming it.
    answer = raw_request(
        server, "chatHistory/append", {"conversationId": "a\x00b", "messages": [user("a")]}
    )
    assert_invalid(answer, "conversationId")


def test_ids_naming_paths_or_sql_are_only_keys(server: Server, root: Path) -> None:
    before = tree(root)
    hostile = [
        "../../escape-conversation",
        "../" * 20 + "tmp/escape-conversation",
        "/tmp/escape-conversation",
        "'; DROP TABLE messages; --",
        "x' OR '1'='1",
    ]
    for conversation in hostile:
        server.append(conversation, user(f"in {conversation}"), workspace="../../escape-ws")
    listed = server.ok("chatHistory/listConversations", {"workspace": "../../escape-ws"})
    assert {c["conversationId"] for c in listed["conversations"]} == set(hostile)
    for conversation in hostile:
        rows = server.get(conversation, workspace="../../escape-ws")
        assert [r["content"] for r in rows] == [f"in {conversation}"]
    assert tree(root) == before
    for base in (root / "store", root / "cwd", root):
        for name in ("escape-conversation", "escape-ws"):
            assert not (base / ".." / ".." / name).exists()
    assert not Path("/tmp/escape-conversation").exists()
    # A NUL in an id is refused, naming it (version 5), and creates nothing.
    refused = raw_request(
        server,
        "chatHistory/append",
        {"conversationId": "NUL\x00byte", "messages": [user("x")], "workspace": "../../escape-ws"},
    )
    assert_invalid(refused, "conversationId")
    assert tree(root) == before


MALFORMED: list[tuple[str, bytes, int | None, int]] = [
    ("invalid JSON", b'{"jsonrpc":"2.0","id":1,', None, -32700),
    ("not UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', None, -32700),
    ("empty body", b"", None, -32700),
    ("array body", b'[{"jsonrpc":"2.0","id":5,"method":"chatHistory/getSummary"}]', None, -32600),
    ("string body", b'"hello"', None, -32600),
    ("missing jsonrpc", b'{"id":7,"method":"chatHistory/getSummary","params":{}}', 7, -32600),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":8,"method":"chatHistory/getSummary"}', 8, -32600),
    ("method not a string", b'{"jsonrpc":"2.0","id":9,"method":42}', 9, -32600),
    ("id an object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"chatHistory/clear"}', None, -32600),
    (
        "params a list",
        b'{"jsonrpc":"2.0","id":10,"method":"chatHistory/get","params":[1]}',
        10,
        -32602,
    ),
    ("params omitted", b'{"jsonrpc":"2.0","id":11,"method":"chatHistory/get"}', 11, -32602),
    (
        "LSP params of the wrong type",
        b'{"jsonrpc":"2.0","id":12,"method":"textDocument/hover","params":{"position":7}}',
        12,
        -32602,
    ),
]


@pytest.mark.parametrize(
    ("body", "answer_id", "code"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_frames_are_answered_and_the_server_keeps_serving(
    server: Server, body: bytes, answer_id: int | None, code: int
) -> None:
    server.send_bytes(frame(body))
    CASES["requests"] += 1
    answer = server.next_message()
    assert answer["id"] == answer_id
    assert answer["error"]["code"] == code
    assert server.alive()


def test_broken_headers_are_answered_and_the_reader_resynchronises(server: Server) -> None:
    valid = request_body(20, "chatHistory/getSummary", {"conversationId": "h"})
    for data, code, answer_id in (
        (b"Content-Length: abc\r\n\r\n" + valid, -32700, None),
        (b"Content-Length: -5\r\n\r\n" + valid, -32700, None),
        (b"Content-Length: 10\r\n\r\n" + valid, -32700, None),  # too short: rest is garbage
        (b"Content-Length: 99999999999999999999\r\n\r\n" + valid, -32600, 20),  # too large
    ):
        server.send_bytes(data)
        CASES["requests"] += 1
        answer = server.next_message()
        assert (answer["id"], answer["error"]["code"]) == (answer_id, code), answer
        assert server.alive()  # its header arrives glued to the leftover bytes, and is found
    # Header names are case-insensitive; extra headers and \n line ends are accepted.
    server.send_bytes(
        b"content-length: %d\nContent-Type: application/vscode-jsonrpc\n\n" % len(valid) + valid
    )
    assert server.next_message() == {"jsonrpc": "2.0", "id": 20, "result": None}


def test_request_after_a_notification_with_a_bad_body_is_served(server: Server) -> None:
    for body in (
        b'{"jsonrpc":"2.0","method":"workspace/didChangeConfiguration","params":7}',
        b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":[]}}',
        b'{"jsonrpc":"2.0","method":"initialized","params":"x"}',
        b'{"jsonrpc":"2.0","id":999999,"result":{"jsonrpc":"2.0","id":1}}',  # unknown response
    ):
        server.send_bytes(frame(body))
        CASES["requests"] += 1
        assert server.alive()


def test_a_second_initialize_cannot_move_the_storage(server: Server, root: Path) -> None:
    before = tree(root)
    answer = raw_request(
        server,
        "initialize",
        {
            "processId": None,
            "capabilities": {},
            "initializationOptions": {"storagePath": str(root / "elsewhere")},
        },
    )
    assert answer["error"]["code"] == -32600, answer
    server.append("after-reinit", user("still here"))
    assert tree(root) == before
    assert not (root / "elsewhere").exists()


def test_nothing_was_written_outside_the_storage_folder(server: Server, root: Path) -> None:
    """Last in this module: after every hostile request above, the only files are the
    database's, in the storage folder; the server's working folder is empty."""
    assert server.alive()
    files = tree(root)
    assert files <= {
        "cwd",
        "store",
        "store/chat-history.sqlite3",
        "store/chat-history.sqlite3-wal",
        "store/chat-history.sqlite3-shm",
        "server.log",
    }, files
    assert not any((root / "cwd").iterdir())
    log = server.stderr_text()
    assert "Traceback" not in log, log[-3000:]
    print(f"\nhostile requests: {dict(CASES)}")
    assert CASES["requests"] > 0
