"""``prepare {continueId}`` per provider kind (protocol.md "Version 4" → Replies in flight;
providers.continuation): through the real manager on a real SQLite file, every body passes the
provider rules, the SDK's own types (and mistral-common) as every body does, and ends as the
kind's continuation rule says — never with a user message the user did not write. A streaming
row is never sent, by prepare or format."""

from __future__ import annotations

from typing import Any

import pytest
from provider_rules import violations
from test_providers_sdk import sdk_problems

from chat_history.errors import InvalidParams
from chat_history.model import Key, Message
from chat_history.providers import KINDS
from chat_history.providers.continuation import NOTE, shape, takes_prefill
from chat_history.service import history, replies
from chat_history.service.preparation import PrepareOptions
from chat_history.service.replies import ReplyBegin, ReplyChange

KEY = Key("ws", "c")
PARTIAL = "The sky is blue because sunlight scatters off "
MODELS = {
    "openai": "gpt-5",
    "openai-responses": "gpt-5",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-pro",
    "ollama": "llama3.1",
    "mistral": "mistral-large-latest",
    "bedrock": "anthropic.claude-sonnet-4-5-v1:0",
    "cohere": "command-a",
}
SETTINGS = {
    "providers": {
        kind: {"provider": kind, "model": model, "contextWindow": 100_000}
        for kind, model in MODELS.items()
    }
}


def interrupted(manager: Any, text: str = PARTIAL) -> int:
    history.append(manager, KEY, [Message(role="user", content="Why is the sky blue?")])
    row = replies.begin(manager, KEY, ReplyBegin(message=Message(role="assistant", content=text)))
    replies.end(manager, KEY, row.id, "interrupted", ReplyChange())
    return int(row.id)


def prepared(manager: Any, kind: str, row_id: int, model: str | None = None) -> Any:
    options = PrepareOptions(provider=kind, model=model or MODELS[kind], continue_id=row_id)
    return history.prepare(manager, KEY, options)


def last_message(kind: str, body: dict[str, Any]) -> tuple[str, str]:
    """(role, text) of the body's last message, in each kind's own shape."""
    if kind == "gemini":
        last = body["contents"][-1]
        return last["role"], "".join(p.get("text", "") for p in last["parts"])
    if kind == "openai-responses":
        last = body["input"][-1]
        content = last["content"]
        text = content if isinstance(content, str) else "".join(c["text"] for c in content)
        return last["role"], text
    last = body["messages"][-1]
    content = last["content"]
    if isinstance(content, str):
        return last["role"], content
    return last["role"], "".join(part.get("text", "") for part in content if isinstance(part, dict))


@pytest.mark.parametrize("kind", KINDS)
def test_the_body_continues_the_reply_as_the_kind_allows(make_manager, kind: str) -> None:
    manager = make_manager(SETTINGS)
    row_id = interrupted(manager)
    request = prepared(manager, kind, row_id)
    body = request.body
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    role, text = last_message(kind, body)
    how = shape(kind, MODELS[kind], Message(role="assistant"))
    if how == "system":  # the reply is in the system instruction; the user's turn is last
        assert (role, text) == ("user", "Why is the sky blue?")
        assert PARTIAL in str(body.get("systemInstruction") or body.get("system"))
    else:
        assert role == "assistant"
        assert text == (PARTIAL.rstrip() if kind in ("anthropic", "bedrock") else PARTIAL)
    assert request.continue_trimmed == (" " if kind in ("anthropic", "bedrock") else "")
    if kind == "mistral":
        assert body["messages"][-1]["prefix"] is True
    users = [m for m in history.get(manager, KEY).messages if m.role == "user"]
    assert str(body).count("Why is the sky blue?") == len(users), "no invented user message"


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("anthropic", "claude-opus-4-6"),
        ("anthropic", "claude-sonnet-4-7-20260901"),
        ("bedrock", "us.anthropic.claude-opus-4-6-v1:0"),
    ],
)
def test_claude_models_that_refuse_a_prefill_get_the_reply_as_a_system_note(
    make_manager, kind: str, model: str
) -> None:
    manager = make_manager(SETTINGS)
    request = prepared(manager, kind, interrupted(manager), model)
    assert violations(kind, request.body) == []
    assert sdk_problems(kind, request.body) == []
    assert last_message(kind, request.body) == ("user", "Why is the sky blue?")
    assert NOTE.format(text=PARTIAL).split("\n")[0] in str(request.body["system"])


def test_which_claude_models_take_a_prefill() -> None:
    assert takes_prefill("claude-sonnet-4-5") and takes_prefill("claude-sonnet-4-20250514")
    assert takes_prefill("claude-3-5-sonnet-20241022") and takes_prefill(None)
    assert not takes_prefill("claude-opus-4-6") and not takes_prefill("claude-opus-5")
    thought = Message(role="assistant", provider_data={"anthropic": {"thinking": [{"x": 1}]}})
    assert shape("anthropic", "claude-sonnet-4-5", thought) == "system"


@pytest.mark.parametrize("kind", KINDS)
def test_prepare_and_format_never_send_a_streaming_row(make_manager, kind: str) -> None:
    manager = make_manager(SETTINGS)
    history.append(manager, KEY, [Message(role="user", content="Why is the sky blue?")])
    replies.begin(manager, KEY, ReplyBegin(message=Message(role="assistant", content="STREAMING")))
    for body in (
        history.prepare(manager, KEY, PrepareOptions(provider=kind)).body,
        history.format(manager, KEY, kind).body,
    ):
        assert "STREAMING" not in str(body)
        assert violations(kind, body) == []


def test_continue_id_must_name_the_newest_interrupted_row(make_manager) -> None:
    manager = make_manager(SETTINGS)
    row_id = interrupted(manager)
    complete = history.append(manager, KEY, [Message(role="assistant", content="later")]).messages[
        0
    ]
    for bad in (row_id, complete.id, 10**6):
        with pytest.raises(InvalidParams) as raised:
            prepared(manager, "openai", bad)
        assert raised.value.field == "continue_id"
