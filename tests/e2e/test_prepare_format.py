"""format and prepare over the real process: aliases, kinds, unknown names, request-scope trim
notifications, ContextOverflow with its data, and settings changes applying to the next call."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from tests.e2e.conftest import Session, StartSession

pytestmark = pytest.mark.engines

BIG = "x" * 2_000
ALIASES = {
    "claude": {"provider": "anthropic", "model": "claude-sonnet-4-5", "contextWindow": 200_000},
    "tiny": {"provider": "openai", "model": "small", "contextWindow": 300},
}


async def three_turns(session: Session) -> None:
    await session.append(
        "c",
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "U1 " + BIG},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "U2 " + BIG},
        {"role": "assistant", "content": "A2"},
        {"role": "user", "content": "U3"},
        {"role": "assistant", "content": "A3"},
    )


async def test_format_for_a_kind_an_alias_and_an_unknown_name(start_session: StartSession):
    session = await start_session(settings={"providers": ALIASES})
    await session.append(
        "c",
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    )
    by_kind = await session.request(
        "chatHistory/format", {"conversationId": "c", "provider": "openai"}
    )
    assert len(by_kind.pop("cacheKey")) == 32
    assert by_kind == {
        "provider": "openai",
        "model": None,
        "body": {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo"},
            ]
        },
    }
    by_alias = await session.request(
        "chatHistory/format", {"conversationId": "c", "provider": "claude"}
    )
    assert by_alias["provider"] == "claude" and by_alias["model"] == "claude-sonnet-4-5"
    assert by_alias["body"]["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [m["role"] for m in by_alias["body"]["messages"]] == ["user", "assistant"]
    default = await session.request("chatHistory/format", {"conversationId": "c"})
    assert default["provider"] == "openai"
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/format", {"conversationId": "c", "provider": "gpt"})
    assert caught.value.code == -32602 and caught.value.data == {"field": "provider"}
    assert "gpt" not in caught.value.message and "anthropic" in caught.value.message
    assert "claude" in caught.value.message


async def test_prepare_trims_to_the_budget_and_notifies(start_session: StartSession):
    session = await start_session(settings={"context": {"maxContextTokens": 200}})
    await three_turns(session)
    prepared = await session.request("chatHistory/prepare", {"conversationId": "c"})
    assert [m["content"] for m in prepared["body"]["messages"]] == [
        "sys",
        "[earlier turns omitted to fit the context window]",
        "U3",
        "A3",
    ]
    assert prepared["budget"] == 200 and prepared["contextWindow"] is None
    assert prepared["trimmed"]["droppedTurns"] == 2
    assert prepared["trimmed"]["droppedMessages"] == 4
    assert prepared["trimmed"]["reason"] == "tokenBudget"
    assert prepared["collapsedToolRows"] == 0 and prepared["collapsedTurns"] == 0
    assert session.trimmed == [
        {
            "workspace": "default",
            "conversationId": "c",
            "scope": "request",
            "reason": "tokenBudget",
            "droppedMessages": 4,
            "droppedTurns": 2,
            "retainedTurns": 1,
            "tokensBefore": prepared["trimmed"]["tokensBefore"],
            "tokensAfter": prepared["trimmed"]["tokensAfter"],
            "budget": 200,
        }
    ]
    # prepare never changes stored rows
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert len(got["messages"]) == 7


async def test_a_settings_change_applies_to_the_next_prepare(start_session: StartSession):
    session = await start_session(configuration={"context": {"maxContextTokens": 200}})
    await three_turns(session)
    first = await session.request("chatHistory/prepare", {"conversationId": "c"})
    assert first["trimmed"] is not None
    session.set_configuration({"context": {"maxContextTokens": 0}})
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=None)
    )
    await session.settle(pulls=2)
    second = await session.request("chatHistory/prepare", {"conversationId": "c"})
    assert second["trimmed"] is None and second["budget"] is None
    assert len(second["body"]["messages"]) == 7


async def test_context_overflow_carries_estimate_and_window(start_session: StartSession):
    session = await start_session(settings={"providers": ALIASES})
    await session.append("c", {"role": "user", "content": "y" * 4_000})
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/prepare", {"conversationId": "c", "provider": "tiny"})
    assert caught.value.code == 1001
    assert caught.value.data == {"estimatedTokens": 1_004, "contextWindow": 300}
    # another model than the alias's: the window is unknown and nothing is refused
    prepared = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "provider": "tiny", "model": "bigger"}
    )
    assert prepared["contextWindow"] is None and prepared["model"] == "bigger"


async def test_prepare_counts_tools_and_extra_tokens(start_session: StartSession):
    session = await start_session()
    await session.append("c", {"role": "user", "content": "abcd"})
    bare = await session.request("chatHistory/prepare", {"conversationId": "c"})
    assert bare["estimatedTokens"] == 5
    loaded = await session.request(
        "chatHistory/prepare",
        {
            "conversationId": "c",
            "extraTokens": 100,
            "tools": [
                {
                    "name": "read_file",
                    "description": "Read a file",
                    "parameters": {"type": "object"},
                }
            ],
        },
    )
    schema_bytes = len("read_file" + "Read a file" + '{"type":"object"}')
    assert loaded["estimatedTokens"] == 5 + 100 + -(-schema_bytes // 4) + 4


async def test_prepare_collapses_old_tool_exchanges_without_notifying(start_session: StartSession):
    session = await start_session()
    for i in range(4):
        await session.append(
            "c",
            {"role": "user", "content": f"q{i}"},
            {
                "role": "assistant",
                "content": None,
                "toolCalls": [{"id": f"call{i}", "name": "ls", "arguments": {}}],
            },
            {"role": "tool", "toolCallId": f"call{i}", "content": "files"},
            {"role": "assistant", "content": f"a{i}"},
        )
    prepared = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "keepToolContextTurns": 1}
    )
    roles = [m["role"] for m in prepared["body"]["messages"]]
    assert roles == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert prepared["collapsedToolRows"] == 4 and prepared["collapsedTurns"] == 2
    assert prepared["trimmed"] is None and session.trimmed == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"extraTokens": -1}, "extraTokens"),
        ({"keepToolContextTurns": "2"}, "keepToolContextTurns"),
        ({"overflowRecovery": "yes"}, "overflowRecovery"),
        ({"tools": [{"description": "no name"}]}, "tools[0].name"),
        ({"provider": 3}, "provider"),
    ],
)
async def test_bad_prepare_params_name_the_field(start_session: StartSession, params, field):
    session = await start_session()
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/prepare", {"conversationId": "c", **params})
    assert caught.value.code == -32602 and caught.value.data == {"field": field}
