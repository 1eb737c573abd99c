"""Provider state on the wire (protocol.md "Version 5" → Provider state that stays valid), over
a real server process on both engines: ``origin`` and ``originAlias`` on append, beginReply and
endReply, StoredMessage's ``origin``, ``saveCompaction`` and ``reportProviderError`` (one report,
then the next prepare succeeds), and every bad input answering -32602 naming its field without
echoing what the client sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.e2e.replies_helpers import begin, end, open_window, rows
from tests.e2e.wire import Wire

__all__ = ["open_window"]  # the fixture, imported for pytest
pytestmark = pytest.mark.engines

SONNET = "claude-sonnet-4-5-20250929"
ALIASES = {
    "providers": {
        "work": {
            "provider": "anthropic",
            "model": SONNET,
            "endpoint": "https://Gateway.example/anthropic/",
            "stateScope": "team-a",
        }
    }
}
WORK_ORIGIN = {
    "provider": "anthropic",
    "model": SONNET,
    "endpoint": "https://gateway.example/anthropic",
    "scope": "team-a",
}
THINKING = {"anthropic": {"thinking": [{"type": "thinking", "thinking": "t", "signature": "s"}]}}


def append(wire: Wire, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    stored: list[dict[str, Any]] = wire.call(
        "chatHistory/append", {"conversationId": "c", "messages": list(messages)}
    )["messages"]
    return stored


def prepare(wire: Wire, provider: str, model: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"conversationId": "c", "provider": provider}
    if model is not None:
        params["model"] = model
    body: dict[str, Any] = wire.call("chatHistory/prepare", params)["body"]
    return body


def thinking_blocks(body: dict[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") == "thinking"
    )


def test_origins_travel_with_their_rows(open_window: Callable[..., Wire]) -> None:
    wire = open_window(settings=ALIASES)
    made = {"provider": "gemini", "model": "gemini-3-pro-preview"}
    stored = append(
        wire,
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "origin": made},
        {"role": "assistant", "content": "b", "originAlias": "work", "providerData": THINKING},
    )
    assert stored[0]["origin"] is None
    assert stored[1]["origin"] == {
        **made,
        "endpoint": "https://generativelanguage.googleapis.com",
        "scope": None,
    }
    assert stored[2]["origin"] == WORK_ORIGIN
    assert [r["origin"] for r in rows(wire)] == [r["origin"] for r in stored]

    row = begin(wire, message={"content": "", "originAlias": "anthropic"})
    assert row["origin"]["endpoint"] == "https://api.anthropic.com"
    ended = end(wire, row["id"], "complete", content="c", originAlias="work")
    assert ended["message"]["origin"] == WORK_ORIGIN


def test_state_goes_back_only_to_its_origin(open_window: Callable[..., Wire]) -> None:
    wire = open_window(settings=ALIASES)
    append(
        wire,
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "originAlias": "work", "providerData": THINKING},
    )
    assert thinking_blocks(prepare(wire, "work")) == 1
    assert thinking_blocks(prepare(wire, "anthropic", SONNET)) == 0
    formatted = wire.call("chatHistory/format", {"conversationId": "c", "provider": "anthropic"})
    assert thinking_blocks(formatted["body"]) == 0


def test_one_report_then_the_next_prepare_leaves_the_refused_state_out(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window(settings=ALIASES)
    append(
        wire,
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "originAlias": "work", "providerData": THINKING},
    )
    other = wire.call(
        "chatHistory/reportProviderError",
        {"conversationId": "c", "provider": "work", "status": 529, "body": "Overloaded"},
    )
    assert other == {"fenced": 0, "reason": None}
    answer = wire.call(
        "chatHistory/reportProviderError",
        {
            "conversationId": "c",
            "provider": "work",
            "status": 400,
            "body": {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "messages.1.content.0: Invalid `signature` in `thinking` block",
                },
            },
        },
    )
    assert answer == {"fenced": 1, "reason": "thinking_signature"}
    assert thinking_blocks(prepare(wire, "work")) == 0
    assert rows(wire)[1]["providerData"] == THINKING, "fencing keeps the state stored"


def test_a_native_compaction_stands_in_where_it_was_minted(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window()
    stored = append(
        wire,
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new question"},
    )
    item = {"type": "compaction", "id": "cmp_9", "encrypted_content": "gAAAA"}
    made = {"provider": "openai-responses", "model": "gpt-5.2"}
    saved = wire.call(
        "chatHistory/saveCompaction",
        {
            "conversationId": "c",
            "coversThroughId": stored[1]["id"],
            "items": [item],
            "origin": made,
        },
    )
    assert saved["coversThroughId"] == stored[1]["id"]
    assert saved["origin"]["endpoint"] == "https://api.openai.com/v1"
    minted = prepare(wire, "openai-responses", "gpt-5.2")["input"]
    assert minted[0] == item and "old question" not in str(minted)
    elsewhere = prepare(wire, "openai-responses", "gpt-4.1")["input"]
    assert "cmp_9" not in str(elsewhere) and "old question" in str(elsewhere)


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        (
            "chatHistory/append",
            {"messages": [{"role": "user", "content": "q", "origin": {"provider": "nope"}}]},
            "messages[0].origin.provider",
        ),
        (
            "chatHistory/append",
            {
                "messages": [
                    {"role": "user", "content": "q", "origin": {"provider": "openai", "key": "x"}}
                ]
            },
            "messages[0].origin.key",
        ),
        (
            "chatHistory/append",
            {"messages": [{"role": "user", "content": "q", "originAlias": "missing"}]},
            "messages[0].originAlias",
        ),
        (
            "chatHistory/append",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": "q",
                        "originAlias": "openai",
                        "origin": {"provider": "openai"},
                    }
                ]
            },
            "messages[0].originAlias",
        ),
        (
            "chatHistory/saveCompaction",
            {"coversThroughId": 1, "items": [], "origin": {"provider": "anthropic"}},
            "items",
        ),
        ("chatHistory/saveCompaction", {"coversThroughId": 1, "items": [{}]}, "origin"),
        (
            "chatHistory/reportProviderError",
            {"provider": "anthropic", "status": 99, "body": "SECRET-BODY"},
            "status",
        ),
        (
            "chatHistory/reportProviderError",
            {"provider": "nowhere", "status": 400, "body": "SECRET-BODY"},
            "provider",
        ),
    ],
)
def test_bad_input_names_its_field(
    open_window: Callable[..., Wire], method: str, params: dict[str, Any], field: str
) -> None:
    wire = open_window()
    error = wire.error(method, {"conversationId": "c", **params})
    assert error["code"] == -32602
    assert error["data"]["field"] == field
    assert "SECRET-BODY" not in str(error)
