"""The core methods over a real server process: append, get, summaries, clear, listing, errors."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from tests.e2e.conftest import StartSession
from tests.e2e.rawclient import StdioClient

pytestmark = pytest.mark.engines

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: str | None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


async def test_initialize_advertises_protocol_and_provider_kinds(start_session: StartSession):
    session = await start_session()
    assert session.initialize_result is not None
    experimental = session.initialize_result.capabilities.experimental
    assert experimental["chatHistory"]["protocolVersion"] == 5
    assert experimental["chatHistory"]["providers"] == [
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "ollama",
        "mistral",
        "bedrock",
        "cohere",
    ]


def test_request_before_initialize_is_refused_with_32002(tmp_path):
    server = StdioClient(tmp_path / "store")
    try:
        answer = server.call_raw("chatHistory/get", {"conversationId": "c"})
        assert answer["error"]["code"] == -32002
        assert server.initialize()["capabilities"]
        assert server.call("chatHistory/get", {"conversationId": "c"})["messages"] == []
    finally:
        assert server.close() == 0


async def test_append_then_get_round_trips_every_field(start_session: StartSession):
    session = await start_session()
    sent = [
        {"role": "system", "content": "You are terse."},
        user(
            "look at this",
            attachments=[{"kind": "image", "mimeType": "image/png", "data": PNG}],
            timestamp="2026-11-30T10:00:00Z",
            metadata={"ui": {"pinned": True}},
        ),
        assistant(
            None,
            toolCalls=[
                {"id": "call_1", "name": "read_file", "arguments": {"path": "a.py"}},
                {"id": "call_2", "name": "grep", "arguments": '{"q":"x"}'},
            ],
            providerData={
                "anthropic": {
                    "thinking": [{"type": "thinking", "thinking": "hm", "signature": "sig"}]
                }
            },
        ),
        {"role": "tool", "toolCallId": "call_1", "name": "read_file", "content": "print(1)"},
        {"role": "tool", "toolCallId": "call_2", "name": "grep", "content": "no match"},
        assistant("It prints 1."),
    ]
    appended = await session.append("c1", *sent)
    assert appended["pruned"] is None
    stored = appended["messages"]
    assert [m["role"] for m in stored] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    ids = [m["id"] for m in stored]
    assert ids == sorted(ids) and len(set(ids)) == 6
    assert [m["turn"] for m in stored] == [0, 1, 1, 1, 1, 1]
    assert stored[1]["timestamp"] == 1_796_032_800_000
    assert stored[1]["attachments"] == [{"kind": "image", "mimeType": "image/png", "data": PNG}]
    assert stored[1]["metadata"] == {"ui": {"pinned": True}}
    assert stored[1]["tokens"] == 1_600 + 3 + 4  # "look at this" = 12 bytes
    assert stored[2]["content"] == ""
    assert stored[2]["toolCalls"][1]["arguments"] == '{"q":"x"}'
    assert stored[2]["providerData"]["anthropic"]["thinking"][0]["signature"] == "sig"
    assert stored[0]["toolCalls"] == [] and stored[0]["attachments"] == []
    assert stored[0]["toolCallId"] is None and stored[0]["name"] is None
    assert stored[0]["metadata"] == {} and stored[0]["providerData"] == {}
    got = await session.request("chatHistory/get", {"conversationId": "c1"})
    assert got["messages"] == stored
    assert got["summary"] is None and got["pruned"] is None and got["hasMore"] is False


async def test_a_bad_row_rejects_the_whole_append_and_names_the_field(start_session: StartSession):
    session = await start_session()
    batch = [
        user("q"),
        assistant(None, toolCalls=[{"id": "a", "name": "t", "arguments": {}}]),
        {"role": "tool", "toolCallId": "a", "content": "r"},
        {"role": "tool", "content": "no id"},
    ]
    with pytest.raises(JsonRpcException) as caught:
        await session.append("c", *batch)
    assert caught.value.code == -32602
    assert caught.value.data == {"field": "messages[3].toolCallId"}
    assert "toolCallId" in caught.value.message
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert got["messages"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"conversationId": "", "messages": [user("x")]}, "conversationId"),
        ({"conversationId": "x" * 257, "messages": [user("x")]}, "conversationId"),
        ({"conversationId": "c", "messages": [user("x")] * 1001}, "messages"),
        (
            {"conversationId": "c", "messages": [{"role": "robot", "content": "x"}]},
            "messages[0].role",
        ),
        ({"conversationId": "c", "messages": [user("x", metadata=[1])]}, "messages[0].metadata"),
        (
            {
                "conversationId": "c",
                "messages": [{"role": "tool", "toolCallId": "nope", "content": "x"}],
            },
            "messages[0].toolCallId",
        ),
        ({"conversationId": 7, "messages": [user("x")]}, "conversationId"),
    ],
)
async def test_malformed_append_params_name_the_field(
    start_session: StartSession, params: dict[str, Any], field: str
):
    session = await start_session()
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/append", params)
    assert caught.value.code == -32602
    assert caught.value.data == {"field": field}


async def test_get_pages_newest_first_with_has_more(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 1000})
    rows = (
        await session.append(
            "c", *[user(f"m{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(10)]
        )
    )["messages"]
    page = await session.request("chatHistory/get", {"conversationId": "c", "limit": 4})
    assert [m["content"] for m in page["messages"]] == ["m6", "a7", "m8", "a9"]
    assert page["hasMore"] is True
    older = await session.request(
        "chatHistory/get",
        {"conversationId": "c", "limit": 4, "beforeId": page["messages"][0]["id"]},
    )
    assert [m["content"] for m in older["messages"]] == ["m2", "a3", "m4", "a5"]
    last = await session.request(
        "chatHistory/get",
        {"conversationId": "c", "limit": 4, "beforeId": older["messages"][0]["id"]},
    )
    assert [m["id"] for m in last["messages"]] == [rows[0]["id"], rows[1]["id"]]
    assert last["hasMore"] is False


async def test_count_retention_prunes_whole_turns_and_notifies(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 3})
    await session.append(
        "c",
        {"role": "system", "content": "sys"},
        user("q1"),
        assistant(None, toolCalls=[{"id": "t1", "name": "ls", "arguments": {}}]),
        {"role": "tool", "toolCallId": "t1", "content": "a b"},
        assistant("ok"),
    )
    result = await session.append("c", user("q2"))
    assert result["pruned"] == {
        "droppedMessages": 4,
        "droppedTurns": 1,
        "retainedTurns": 1,
        "reasons": ["count"],
        "droppedBranches": 0,
    }
    assert [m["content"] for m in result["messages"]] == ["q2"]
    assert session.trimmed == [
        {
            "workspace": "default",
            "conversationId": "c",
            "scope": "storage",
            "reason": "count",
            "droppedMessages": 4,
            "droppedTurns": 1,
            "retainedTurns": 1,
            "tokensBefore": 5 + 5 + 14 + 5 + 5 + 5,
            "tokensAfter": 10,
            "budget": None,
        }
    ]
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert [(m["role"], m["content"]) for m in got["messages"]] == [
        ("system", "sys"),
        ("user", "q2"),
    ]


async def test_token_retention_reports_its_budget(start_session: StartSession):
    session = await start_session(settings={"maxTokens": 40, "maxMessages": 100})
    await session.append("c", user("x" * 100), assistant("y" * 20))
    result = await session.append("c", user("z" * 40))
    assert result["pruned"]["reasons"] == ["tokens"]
    event = session.trimmed[-1]
    assert event["reason"] == "tokens" and event["budget"] == 40
    assert event["tokensBefore"] == 29 + 9 + 14 and event["tokensAfter"] == 14


async def test_age_retention_deletes_old_turns_on_append(start_session: StartSession):
    session = await start_session(settings={"maxAgeHours": 1})
    result = await session.append(
        "c", user("old", timestamp=1_000), assistant("old reply", timestamp=1_000), user("new")
    )
    assert [m["content"] for m in result["messages"]] == ["old", "old reply", "new"]
    assert result["pruned"] == {
        "droppedMessages": 2,
        "droppedTurns": 1,
        "retainedTurns": 1,
        "reasons": ["age"],
        "droppedBranches": 0,
    }
    assert session.trimmed[-1]["reason"] == "age" and session.trimmed[-1]["budget"] is None
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert [m["content"] for m in got["messages"]] == ["new"]


async def test_age_retention_runs_on_read(start_session: StartSession):
    session = await start_session(settings={"maxAgeHours": 0})
    await session.append("c", user("old", timestamp=1_000), assistant("old", timestamp=1_000))
    await session.request("chatHistory/saveSummary", {"conversationId": "c", "summary": "s"})
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"chatHistory": {"maxAgeHours": 1}})
    )
    await session.settle()
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert got["messages"] == []
    assert got["pruned"] == {
        "droppedMessages": 2,
        "droppedTurns": 1,
        "retainedTurns": 0,
        "reasons": ["age"],
        "droppedBranches": 0,
    }
    assert got["summary"] is not None  # saved just now: younger than the limit


async def test_summaries_clear_and_listing(start_session: StartSession):
    session = await start_session()
    await session.append("a", user("first"))
    await session.append("b", user("second"))
    saved = await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "a", "summary": "Auth setup covered.", "coversThroughId": 1},
    )
    assert saved["summary"] == "Auth setup covered." and saved["coversThroughId"] == 1
    assert isinstance(saved["updatedAt"], int)
    assert await session.request("chatHistory/getSummary", {"conversationId": "a"}) == saved
    assert await session.request("chatHistory/getSummary", {"conversationId": "b"}) is None
    listed = (await session.request("chatHistory/listConversations", {}))["conversations"]
    # saving a summary is a client's write: "a" is the most recently active (version 2)
    assert [c["conversationId"] for c in listed] == ["a", "b"]
    assert listed[0]["hasSummary"] is True and listed[0]["messageCount"] == 1
    assert set(listed[0]) == {  # version 2 (tests/e2e/test_conversations.py)
        "conversationId",
        "workspace",
        "title",
        "titleSource",
        "createdAt",
        "lastActivity",
        "messageCount",
        "tokens",
        "hasSummary",
        "metadata",
    }
    cleared = await session.request("chatHistory/clear", {"conversationId": "a"})
    assert cleared == {"deletedMessages": 1}
    assert await session.request("chatHistory/getSummary", {"conversationId": "a"}) is None
    got = await session.request("chatHistory/get", {"conversationId": "a"})
    assert got["messages"] == [] and got["summary"] is None
    listed = (await session.request("chatHistory/listConversations", {}))["conversations"]
    assert [c["conversationId"] for c in listed] == ["b"]


async def test_workspaces_keep_separate_histories(start_session: StartSession):
    session = await start_session(
        workspace_folders=[types.WorkspaceFolder(uri="file:///proj/one", name="one")]
    )
    await session.append("c", user("in one"))
    await session.append("c", user("in two"), workspace="file:///proj/two")
    one = await session.request("chatHistory/get", {"conversationId": "c"})
    two = await session.request(
        "chatHistory/get", {"conversationId": "c", "workspace": "file:///proj/two"}
    )
    assert [m["content"] for m in one["messages"]] == ["in one"]
    assert [m["content"] for m in two["messages"]] == ["in two"]
    listed = await session.request(
        "chatHistory/listConversations", {"workspace": "file:///proj/two"}
    )
    assert [c["conversationId"] for c in listed["conversations"]] == ["c"]


async def test_unopenable_storage_answers_1002_and_the_server_stays_up(
    start_session: StartSession, tmp_path, engine: str
):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("I am a file")
    # On PostgreSQL: a database server that is not there (no socket in that folder).
    unreachable = {"database": f"postgresql://postgres@/none?host={blocker}"}
    session = await start_session(
        storage=blocker / "store", init_options=unreachable if engine == "postgres" else None
    )
    for _ in range(2):
        with pytest.raises(JsonRpcException) as caught:
            await session.append("c", user("x"))
        assert caught.value.code == 1002
        assert caught.value.data["reason"]
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/get", {"conversationId": ""})
    assert caught.value.code == -32602
    assert blocker.read_text() == "I am a file"


@pytest.mark.sqlite_only
async def test_storage_path_from_environment(start_session: StartSession, tmp_path):
    folder = tmp_path / "from-env"
    session = await start_session(
        init_options={"storagePath": None}, env={"CHAT_HISTORY_STORAGE": str(folder)}
    )
    await session.append("c", user("x"))
    assert (folder / "chat-history.sqlite3").exists()
    assert (folder / "chat-history.sqlite3").stat().st_mode & 0o777 == 0o600


async def test_unknown_method_is_method_not_found(start_session: StartSession):
    session = await start_session()
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/nope", {})
    assert caught.value.code == -32601
