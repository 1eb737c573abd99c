"""``prepare {continueId}`` per provider kind (protocol.md "Version 4" → Replies in flight;
providers.continuation): through the real manager on a real SQLite file, every body passes the
provider rules, the SDK's own types (and mistral-common) as every body does, and ends as the
kind's continuation rule says — never with a user message the user did not write. A streaming
row is never sent, by prepare or format."""

from __future__ import annotations

from typing import Any

import pytest
from provider_rules import request_problems, violations
from test_providers_sdk import sdk_problems

from chat_history.errors import InvalidParams
from chat_history.model import Key, Message
from chat_history.providers import KINDS
from chat_history.providers.continuation import NOTE, shape, takes_prefill
from chat_history.service import edits, history, replies
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


def interrupted(
    manager: Any,
    text: str = PARTIAL,
    before: tuple[Message, ...] = (Message(role="user", content="Why is the sky blue?"),),
    provider_data: dict[str, Any] | None = None,
) -> int:
    """The id of an interrupted reply ``text`` stored after the rows ``before``."""
    if before:
        history.append(manager, KEY, list(before))
    reply = Message(role="assistant", content=text, provider_data=provider_data or {})
    row = replies.begin(manager, KEY, ReplyBegin(message=reply))
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
    assert takes_prefill("claude-3-5-sonnet-20241022") and not takes_prefill(None)
    assert not takes_prefill("claude-opus-4-6") and not takes_prefill("claude-opus-5")
    assert not takes_prefill("claude-fable-5") and not takes_prefill("gpt-5")
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


def system_text(kind: str, body: dict[str, Any]) -> str:
    """The texts of the system instruction's blocks (Anthropic, Bedrock, Gemini), one a line."""
    system = body["systemInstruction"]["parts"] if kind == "gemini" else body["system"]
    if isinstance(system, str):
        return system
    return "\n".join(block.get("text", "") for block in system)


def checked(kind: str, request: Any, *, prefill: bool) -> dict[str, Any]:
    """The body of ``request``, after every check a body sent to generate must pass."""
    body: dict[str, Any] = request.body
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    assert request_problems(kind, body, prefill=prefill) == []
    return body


THINKING = {
    "anthropic": {"thinking": [{"type": "thinking", "thinking": "Hm.", "signature": "c2ln"}]}
}
EARLIER = "Good question."


@pytest.mark.parametrize(
    ("kind", "model", "data"),
    [
        ("gemini", "gemini-2.5-pro", None),
        ("anthropic", "claude-opus-4-6", None),
        ("anthropic", "claude-sonnet-4-5", THINKING),
        ("bedrock", "us.anthropic.claude-opus-4-6-v1:0", None),
    ],
)
def test_a_reply_right_after_another_assistant_row_never_ends_the_body_on_that_row(
    make_manager, kind: str, model: str, data: dict[str, Any] | None
) -> None:
    manager = make_manager(SETTINGS)
    before = (
        Message(role="user", content="Why is the sky blue?"),
        Message(role="assistant", content=EARLIER),
    )
    request = prepared(
        manager, kind, interrupted(manager, before=before, provider_data=data), model
    )
    body = checked(kind, request, prefill=False)
    role, text = last_message(kind, body)
    assert role == "user" and EARLIER not in text
    assert NOTE.format(text=PARTIAL) in text, "the note is the application's turn after it"
    assert request.continue_trimmed == ""


@pytest.mark.parametrize(
    ("kind", "model", "prefill"),
    [
        ("anthropic", "claude-fable-5", False),
        ("anthropic", "claude-opus-5", False),
        ("anthropic", "claude-sonnet-4-6-20260217", False),
        ("anthropic", "CLAUDE-SONNET-4-5-20250929", True),
        ("anthropic", "claude-opus-4-1@20250805", True),
        ("anthropic", "claude-3-5-sonnet-latest", True),
        ("bedrock", "Anthropic.Claude-Opus-4-6-v1:0", False),
        ("bedrock", "EU.anthropic.claude-sonnet-4-6", False),
        ("bedrock", "anthropic.claude-fable-5-v1:0", False),
        (
            "bedrock",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/k2x9p4",
            False,
        ),
        ("bedrock", "arn:aws:bedrock:us-west-2:123456789012:provisioned-model/abc123", False),
        (
            "bedrock",
            "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-opus-4-6-v1:0",
            False,
        ),
        (
            "bedrock",
            "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-sonnet-20240620-v1:0",
            True,
        ),
        ("bedrock", "global.anthropic.claude-haiku-4-5-20251001-v1:0", True),
        ("bedrock", "APAC.Anthropic.Claude-3-7-Sonnet-20250219-V1:0", True),
    ],
)
def test_model_ids_are_read_as_the_provider_reads_them(
    make_manager, kind: str, model: str, prefill: bool
) -> None:
    manager = make_manager(SETTINGS)
    request = prepared(manager, kind, interrupted(manager), model)
    body = checked(kind, request, prefill=prefill)
    if prefill:
        assert last_message(kind, body) == ("assistant", PARTIAL.rstrip())
        assert request.continue_trimmed == " "
    else:  # the safe shape: the note, never a final assistant message
        assert last_message(kind, body) == ("user", "Why is the sky blue?")
        assert NOTE.format(text=PARTIAL) in system_text(kind, body)
        assert request.continue_trimmed == ""


@pytest.mark.parametrize("model", ["amazon.nova-pro-v1:0", "us.meta.llama3-1-70b-instruct-v1:0"])
def test_bedrock_reports_the_whitespace_it_cuts_for_every_model(make_manager, model: str) -> None:
    manager = make_manager(SETTINGS)
    request = prepared(manager, "bedrock", interrupted(manager, PARTIAL + "\n\n"), model)
    body = checked("bedrock", request, prefill=True)
    assert last_message("bedrock", body) == ("assistant", PARTIAL.rstrip())
    assert request.continue_trimmed == " \n\n"


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("gemini", "gemini-2.5-pro"),
        ("anthropic", "claude-opus-4-6"),
        ("bedrock", "us.anthropic.claude-opus-4-6-v1:0"),
    ],
)
def test_the_note_follows_the_application_system_prompt(
    make_manager, kind: str, model: str
) -> None:
    """The system prompt's blocks (and its cache mark) are those of a request without the
    note, so the continuation reads the cached head; the note is one block after them."""
    manager = make_manager(SETTINGS)
    before = (
        Message(role="system", content="You are a patient physics teacher."),
        Message(role="user", content="Why is the sky blue?"),
    )
    row_id = interrupted(manager, before=before)
    body = checked(kind, prepared(manager, kind, row_id, model), prefill=False)
    edits.truncate(manager, KEY, row_id)  # the same conversation without the reply
    plain = history.prepare(manager, KEY, PrepareOptions(provider=kind, model=model)).body
    if kind == "gemini":
        head, blocks = plain["systemInstruction"]["parts"], body["systemInstruction"]["parts"]
    else:
        head, blocks = plain["system"], body["system"]
    assert blocks[: len(head)] == head
    assert len(blocks) == len(head) + 1
    assert blocks[-1]["text"] == NOTE.format(text=PARTIAL)


#: Whether each kind's default model (MODELS) continues a final assistant message.
PREFILL = {kind: kind != "gemini" for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("system", [True, False])
def test_a_reply_that_is_all_there_is_to_send(make_manager, kind: str, system: bool) -> None:
    """No empty body, and no ``(continued)`` user turn: the reply travels as the kind allows,
    or as the application's note where the kind wants a user turn first."""
    manager = make_manager(SETTINGS)
    before = (Message(role="system", content="You are terse."),) if system else ()
    request = prepared(manager, kind, interrupted(manager, before=before))
    body = checked(kind, request, prefill=PREFILL[kind])
    assert "(continued)" not in str(body)
    assert PARTIAL.rstrip() in str(body)
