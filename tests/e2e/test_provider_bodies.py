"""Provider bodies over the real process: tool names that stay distinct (Mistral, Bedrock),
Gemini 3 by its aliases and paths, call ids only for Gemini 3+, Mistral continuations (issue 22
items 14-17), and prompt caches: breakpoints and ``cacheKey`` for ``format``, ``prepare`` and
compaction requests, and ``promptCache: "off"`` (protocol.md "Version 3")."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from tests.e2e.conftest import Session, StartSession

KEEP_ALL = {"maxMessages": 100_000, "maxTokens": 0, "maxAgeHours": 0}
EPHEMERAL = {"type": "ephemeral"}
POINT = {"cachePoint": {"type": "default"}}
SKIP = "skip_thought_signature_validator"

pytestmark = pytest.mark.engines


async def fmt(session: Session, provider: str, model: str | None = None, conversation: str = "c"):
    params: dict[str, Any] = {"conversationId": conversation, "provider": provider}
    if model is not None:
        params["model"] = model
    return await session.request("chatHistory/format", params)


async def two_tools(session: Session) -> None:
    """Two tools whose names clean alike, each called once, then a reply."""
    for call_id, name in (("c1", "a.b"), ("c2", "a_b")):
        await session.append(
            "c",
            {"role": "user", "content": f"use {name}"},
            {
                "role": "assistant",
                "content": "",
                "toolCalls": [{"id": call_id, "name": name, "arguments": {}}],
            },
            {"role": "tool", "content": "ok", "toolCallId": call_id, "name": name},
            {"role": "assistant", "content": f"{name} done"},
        )


async def test_tool_names_stay_distinct_and_stable(start_session: StartSession):
    session = await start_session(settings=KEEP_ALL)
    await two_tools(session)
    mistral = (await fmt(session, "mistral"))["body"]["messages"]
    calls = [c["function"]["name"] for m in mistral for c in m.get("tool_calls") or []]
    results = [m["name"] for m in mistral if m["role"] == "tool"]
    assert len(set(calls)) == 2 and calls == results
    assert calls[1] == "a_b" and re.fullmatch(r"a_b_[0-9a-f]{12}", calls[0])
    bedrock = (await fmt(session, "bedrock"))["body"]["messages"]
    uses = [b["toolUse"]["name"] for m in bedrock for b in m["content"] if "toolUse" in b]
    assert uses == calls
    # the next request maps alike
    await session.append("c", {"role": "user", "content": "again"})
    later = (await fmt(session, "mistral"))["body"]["messages"]
    assert [c["function"]["name"] for m in later for c in m.get("tool_calls") or []] == calls


async def test_gemini_3_aliases_get_placeholders_and_ids_only_gemini_3(
    start_session: StartSession,
):
    session = await start_session(settings=KEEP_ALL)
    await session.append(
        "c",
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "call_a", "name": "get_weather", "arguments": {"city": "Rome"}}],
        },
        {"role": "tool", "content": "24C", "toolCallId": "call_a", "name": "get_weather"},
    )
    vertex = "projects/p/locations/global/publishers/google/models/gemini-3-pro-preview"
    for model in ("gemini-flash-latest", "gemini-pro-latest", vertex):
        contents = (await fmt(session, "gemini", model))["body"]["contents"]
        call = contents[1]["parts"][0]
        assert call["thoughtSignature"] == SKIP, model
        assert call["functionCall"]["id"] == "call_a"
        assert contents[2]["parts"][0]["functionResponse"]["id"] == "call_a"
    for model in ("gemini-2.5-flash", None):
        contents = (await fmt(session, "gemini", model))["body"]["contents"]
        assert "thoughtSignature" not in contents[1]["parts"][0]
        assert "id" not in contents[1]["parts"][0]["functionCall"]
        assert "id" not in contents[2]["parts"][0]["functionResponse"]


async def test_a_mistral_body_ending_with_the_assistant_is_a_continuation(
    start_session: StartSession,
):
    session = await start_session(settings=KEEP_ALL)
    await session.append(
        "c", {"role": "user", "content": "Tell a story"}, {"role": "assistant", "content": "Once"}
    )
    messages = (await fmt(session, "mistral"))["body"]["messages"]
    assert messages[-1] == {"role": "assistant", "content": "Once", "prefix": True}
    await session.append("c", {"role": "user", "content": "go on"})
    messages = (await fmt(session, "mistral"))["body"]["messages"]
    assert all("prefix" not in m for m in messages)


# -- prompt caches ---------------------------------------------------------------------------------


def marks(body: dict[str, Any]) -> int:
    text = json.dumps(body)
    return text.count('"cache_control"') + text.count('"cachePoint"')


async def long_chat(session: Session, conversation: str = "c", turns: int = 8) -> None:
    await session.append(conversation, {"role": "system", "content": "Be brief."})
    for n in range(turns):
        await session.append(
            conversation,
            {"role": "user", "content": f"U{n} " + "u" * 400},
            {"role": "assistant", "content": f"A{n} " + "a" * 400},
        )
    await session.append(conversation, {"role": "user", "content": "last question"})


async def test_prepare_marks_anthropic_and_bedrock_bodies_as_the_spec_places_them(
    start_session: StartSession,
):
    session = await start_session(settings={**KEEP_ALL, "context": {"maxContextTokens": 700}})
    await long_chat(session)
    prepared = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "provider": "anthropic"}
    )
    body = prepared["body"]
    assert prepared["trimmed"] is not None
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    first = body["messages"][0]["content"]
    assert first[0]["text"].startswith("[earlier turns omitted")
    assert first[0]["cache_control"] == EPHEMERAL  # the context note
    assert body["messages"][-2]["role"] == "assistant"
    assert body["messages"][-3]["content"][-1]["cache_control"] == EPHEMERAL  # newest user
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL  # final
    assert marks(body) == 4
    bedrock = await session.request(
        "chatHistory/prepare",
        {"conversationId": "c", "provider": "bedrock", "model": "amazon.nova-pro-v1:0"},
    )
    assert bedrock["body"]["system"] == [{"text": "Be brief."}, POINT]
    assert bedrock["body"]["messages"][0]["content"][1] == POINT
    assert marks(bedrock["body"]) == 4
    llama = await session.request(
        "chatHistory/prepare",
        {"conversationId": "c", "provider": "bedrock", "model": "meta.llama3-70b-instruct-v1:0"},
    )
    assert marks(llama["body"]) == 0
    haiku_3 = await session.request(  # Bedrock refuses a cache point for Claude 3 Haiku
        "chatHistory/prepare",
        {
            "conversationId": "c",
            "provider": "bedrock",
            "model": "anthropic.claude-3-haiku-20240307-v1:0",
        },
    )
    assert marks(haiku_3["body"]) == 0
    openai = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "provider": "openai"}
    )
    assert marks(openai["body"]) == 0
    keys = {r["cacheKey"] for r in (prepared, bedrock, llama, haiku_3, openai)}
    assert len(keys) == 1 and re.fullmatch(r"[0-9a-f]{32}", keys.pop())


async def test_the_cache_key_is_one_per_conversation_and_survives_a_restart(
    start_session: StartSession, tmp_path
):
    storage = tmp_path / "shared"
    session = await start_session(settings=KEEP_ALL, storage=storage)
    await session.append("chat-1", {"role": "user", "content": "hi"})
    one = (await fmt(session, "openai", conversation="chat-1"))["cacheKey"]
    prepared = await session.request("chatHistory/prepare", {"conversationId": "chat-1"})
    assert prepared["cacheKey"] == one
    other = (await fmt(session, "openai", conversation="chat-2"))["cacheKey"]
    elsewhere = await session.request(
        "chatHistory/format", {"conversationId": "chat-1", "workspace": "file:///proj/two"}
    )
    assert len({one, other, elsewhere["cacheKey"]}) == 3
    assert "chat" not in one and "proj" not in elsewhere["cacheKey"]
    again = await start_session(settings=KEEP_ALL, storage=storage)
    assert (await fmt(again, "anthropic", conversation="chat-1"))["cacheKey"] == one
    fresh = await start_session(settings=KEEP_ALL, storage=tmp_path / "new")
    assert (await fmt(fresh, "openai", conversation="chat-1"))["cacheKey"] != one


async def test_prompt_cache_off_sends_no_marker_and_still_a_cache_key(
    start_session: StartSession,
):
    settings = {**KEEP_ALL, "context": {"maxContextTokens": 700, "promptCache": "off"}}
    session = await start_session(settings=settings)
    await long_chat(session)
    for provider, model in (("anthropic", None), ("bedrock", "anthropic.claude-haiku-4-5")):
        prepared = await session.request(
            "chatHistory/prepare",
            {"conversationId": "c", "provider": provider, **({"model": model} if model else {})},
        )
        assert marks(prepared["body"]) == 0 and len(prepared["cacheKey"]) == 32
        assert marks((await fmt(session, provider, model))["body"]) == 0


async def test_the_compaction_request_is_marked_and_keyed_alike(start_session: StartSession):
    compaction = {"triggerRatio": 0.8, "keepRecentTurns": 2, "maxSummaryTokens": 100}
    settings = {**KEEP_ALL, "context": {"maxContextTokens": 1_000, "compaction": compaction}}
    session = await start_session(settings=settings)
    await long_chat(session)
    prepared = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "provider": "anthropic"}
    )
    proposal = prepared["compaction"]
    assert proposal is not None
    request = proposal["request"]
    assert request["cacheKey"] == prepared["cacheKey"]
    body = request["body"]
    assert body["system"][-1]["cache_control"] == EPHEMERAL
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL  # the prompt
    assert 3 <= marks(body) <= 4
