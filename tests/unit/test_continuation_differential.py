"""A differential over interrupted replies (issue 42, "Continuations"): a grid of histories (with
and without an application system prompt; the reply alone, after the user, after another
assistant row, after a tool loop, after calls left unanswered, after an application instruction,
in a history that opens with the assistant; replies ending in whitespace, blank, with thinking,
with a call) × the eight provider kinds × model ids as each provider spells them (any case,
Bedrock's geography prefixes and ARNs, version suffixes, Claude families that do and do not
take a prefill, ids nobody knows). Each body is made by ``prepare``'s own pipeline
(``policy.prepare.context.prepare_rows``, then ``service.preparation.prepared_request`` continuing
the reply) and checked with the provider rules, each SDK's types and mistral-common, and against
protocol.md "Continuations (changed)": it never ends on another assistant row than the reply, never
sends an empty turn list, never sends a prefill to a model that refuses one, reports in
``continueTrimmed`` exactly what it cut from the reply, keeps the application's system prompt as a
request without the note has it (the note after it), and adds no ``(continued)`` user turn.

What a target takes is written here from the providers' documents (Claude 4.6 and later, and a
request with extended thinking, refuse a prefill; Gemini wants a user turn last), not read from
``providers.continuation``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from provider_rules import TURNS_KEY, request_problems, violations
from test_providers_golden import PNG, carrier, msg, result
from test_providers_sdk import sdk_problems

from chat_history.model import Attachment, Message, ToolCall
from chat_history.policy.budget import Route
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import RequestOptions
from chat_history.providers import KINDS
from chat_history.providers.continuation import NOTE
from chat_history.service.preparation import PreparedRequest, prepared_request
from chat_history.settings import load_settings

PARTIAL = "The sky is blue because sunlight scatters off"
THINKING = {
    "anthropic": {"thinking": [{"type": "thinking", "thinking": "Hm.", "signature": "c2ln"}]}
}
CALL = (ToolCall(id="toolu_9", name="look", arguments={"at": "sky"}),)

SYSTEMS: dict[str, tuple[Message, ...]] = {
    "no-system": (),
    "system": (msg("system", "You are a patient physics teacher."),),
}
BEFORE: dict[str, tuple[Message, ...]] = {
    "reply-only": (),
    "user": (msg("user", "Why is the sky blue?"),),
    "user-image": (
        msg(
            "user",
            "Why is it this blue?",
            attachments=(Attachment(mime_type="image/png", data=PNG),),
        ),
    ),
    "after-assistant": (msg("user", "Why is the sky blue?"), msg("assistant", "Good question.")),
    "after-two-assistants": (
        msg("user", "Why is the sky blue?"),
        msg("assistant", "Good question."),
        msg("assistant", "Let me explain.\n"),
    ),
    "tool-loop": (
        msg("user", "Why is the sky blue?"),
        carrier("c1", content="Looking it up."),
        result("c1", "Rayleigh scattering."),
    ),
    "tool-loop-then-assistant": (
        msg("user", "Why is the sky blue?"),
        carrier("c1"),
        result("c1", "Rayleigh scattering."),
        msg("assistant", "Found it."),
    ),
    "unanswered-call": (msg("user", "Why is the sky blue?"), carrier("c8")),
    "unanswered-call-with-text": (
        msg("user", "Why is the sky blue?"),
        carrier("c8", content="Checking."),
    ),
    "earlier-turns": (
        msg("user", "Hi."),
        msg("assistant", "Hello."),
        msg("user", "Why is the sky blue?"),
    ),
    "application-instruction": (
        msg("user", "Why is the sky blue?"),
        msg("assistant", "Good question."),
        msg("system", "Answer in one paragraph."),
    ),
    "system-after-user": (msg("user", "Why is the sky blue?"), msg("system", "Be brief.")),
    "opens-with-assistant": (msg("assistant", "Where were we?"),),
}
#: The cut replies, as the store keeps them.
REPLIES: dict[str, Message] = {
    name: msg("assistant", text, status="interrupted", **fields)
    for name, text, fields in [
        ("text", PARTIAL, {}),
        ("space", PARTIAL + " ", {}),
        ("newlines", PARTIAL + ",\n\n", {}),
        ("blank", " \n", {}),
        ("empty-with-call", "", {"tool_calls": CALL}),
        ("text-with-call", PARTIAL + " ", {"tool_calls": CALL}),
        ("thinking", PARTIAL + " ", {"provider_data": THINKING}),
    ]
}

#: Claude model ids as the Anthropic API (and Vertex) takes them: does the model continue a
#: final assistant message? (Claude 4.6 and later do not; None and unknown ids: not known to.)
ANTHROPIC_MODELS: dict[str | None, bool] = {
    "claude-sonnet-4-5": True,
    "claude-sonnet-4-5-20250929": True,
    "CLAUDE-HAIKU-4-5": True,
    "claude-opus-4-1@20250805": True,
    "claude-3-7-sonnet-latest": True,
    "claude-3-5-haiku-20241022": True,
    "claude-3-5-sonnet-v2@20241022": True,
    "claude-opus-4-6": False,
    "claude-sonnet-4-6": False,
    "claude-opus-4-7": False,
    "claude-opus-5": False,
    "claude-fable-5": False,
    "claude-next": False,
    None: False,
}
ARN = "arn:aws:bedrock:us-east-1:123456789012"
#: Bedrock model ids: True/False for Claude as above; "other" for a model that is not Claude
#: (Converse has no prefill flag: the reply is the last assistant message of the history).
BEDROCK_MODELS: dict[str | None, bool | str] = {
    "anthropic.claude-sonnet-4-5-20250929-v1:0": True,
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0": True,
    "GLOBAL.ANTHROPIC.CLAUDE-HAIKU-4-5-20251001-V1:0": True,
    "anthropic.claude-3-haiku-20240307-v1:0:200k": True,
    "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0": True,
    "Anthropic.Claude-Opus-4-6-v1:0": False,
    "us.anthropic.claude-opus-4-6-v1": False,
    "apac.anthropic.claude-sonnet-4-6": False,
    "eu.anthropic.claude-fable-5-v1:0": False,
    f"{ARN}:inference-profile/us.anthropic.claude-opus-4-6-v1:0": False,
    f"{ARN}:application-inference-profile/k2x9p4q7r1": False,
    f"{ARN}:provisioned-model/abc123": False,
    None: False,
    "amazon.nova-pro-v1:0": "other",
    "us.meta.llama3-1-70b-instruct-v1:0": "other",
    "mistral.mistral-large-2407-v1:0": "other",
}
OTHER_MODELS = {
    "openai": "gpt-5",
    "openai-responses": "gpt-5",
    "gemini": "gemini-2.5-pro",
    "ollama": "llama3.1",
    "mistral": "mistral-large-latest",
    "cohere": "command-a",
}
ROUTES = [
    *(("anthropic", model) for model in ANTHROPIC_MODELS),
    *(("bedrock", model) for model in BEDROCK_MODELS),
    *OTHER_MODELS.items(),
]
assert {kind for kind, _ in ROUTES} == set(KINDS)
CONTEXT = load_settings({}).settings.context
#: Kinds whose body opens with a user turn (semantics.md "Provider bodies"): a reply that is all
#: there is cannot be their first message.
USER_FIRST = {"anthropic", "bedrock", "gemini", "mistral"}


def takes_a_final_assistant(kind: str, model: str | None, reply: Message) -> bool:
    """Whether the target continues (or answers after) a final assistant message."""
    if kind == "gemini":
        return False
    if kind == "anthropic" or (kind == "bedrock" and BEDROCK_MODELS[model] != "other"):
        table = ANTHROPIC_MODELS if kind == "anthropic" else BEDROCK_MODELS
        return table[model] is True and "anthropic" not in reply.provider_data
    return True


def continued(kind: str, model: str | None, rows: list[Message]) -> PreparedRequest:
    """``prepare {continueId}``'s body for ``rows`` (the reply last), as the manager makes it."""
    route = Route(name=kind, kind=kind, model=model, context_window=None)
    prepared = prepare_rows(rows, RequestOptions(settings=CONTEXT, route=route))
    return prepared_request(route, prepared, None, cache_key="k", breakpoints=True, continuing=True)


def plain(kind: str, model: str | None, rows: list[Message]) -> PreparedRequest:
    """``prepare``'s body for ``rows`` without a continuation."""
    route = Route(name=kind, kind=kind, model=model, context_window=None)
    prepared = prepare_rows(rows, RequestOptions(settings=CONTEXT, route=route))
    return prepared_request(route, prepared, None, cache_key="k", breakpoints=True)


def role_of(kind: str, turn: dict[str, Any]) -> str:
    """``assistant``, ``system`` or ``user`` (a user turn, tool results, a function response)."""
    if kind == "openai-responses" and turn.get("type", "message") != "message":
        return "assistant" if turn["type"] in ("function_call", "reasoning") else "user"
    role = turn.get("role")
    if role in ("assistant", "model"):
        return "assistant"
    return "system" if role in ("system", "developer") else "user"


def texts(turn: dict[str, Any]) -> list[str]:
    """The texts of a turn's text blocks (a string content is one)."""
    content = turn.get("content", turn.get("parts"))
    if isinstance(content, str):
        return [content]
    return [block["text"] for block in content or () if isinstance(block, dict) and "text" in block]


def system_blocks(kind: str, body: dict[str, Any]) -> list[Any]:
    """The system instruction's blocks (Anthropic, Bedrock, Gemini), none for other kinds."""
    if kind == "gemini":
        return list(body.get("systemInstruction", {}).get("parts", []))
    system = body.get("system", [])
    return [{"type": "text", "text": system}] if isinstance(system, str) else list(system)


def strings(value: Any) -> Iterator[str]:
    """Every string in ``value``, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def problems(kind: str, model: str | None, before: list[Message], reply: Message) -> list[str]:
    """Everything wrong with the continued body of ``before`` + ``reply``."""
    request = continued(kind, model, [*before, reply])
    body: dict[str, Any] = request.body
    trimmed = request.continue_trimmed
    found = [
        *violations(kind, body),
        *sdk_problems(kind, body),
        *request_problems(kind, body, prefill=takes_a_final_assistant(kind, model, reply)),
    ]
    sent = list(strings(body))
    first = next((row for row in before if row.role != "system"), None)
    if "(continued)" in sent and (first is None or first.role == "user"):
        found.append("a (continued) turn the user did not write")
    turns = body[TURNS_KEY[kind]]
    if not turns:
        return found
    last = turns[-1]
    note = NOTE.format(text=reply.content)
    system = system_blocks(kind, body)
    in_system = any(note in text for text in strings(system))
    notes = sum(text.count(note) for text in sent)
    sendable = reply.content.strip() and (first is not None or kind not in USER_FIRST)
    if takes_a_final_assistant(kind, model, reply) and sendable and role_of(kind, last) == "user":
        found.append("the reply could have been the final assistant message")
    if role_of(kind, last) == "assistant":
        carried = (texts(last) or [""])[-1]
        if not carried.strip() or not reply.content.startswith(carried):
            found.append(f"ends on another assistant row: {carried!r}")
        elif trimmed != reply.content[len(carried) :]:
            found.append(f"continueTrimmed {trimmed!r} for {reply.content!r} sent as {carried!r}")
        if notes:
            found.append("the reply is sent twice")
        return found
    if in_system:  # the note after the application's system prompt, as it is without the note
        head = system_blocks(kind, plain(kind, model, list(before)).body)
        if system[: len(head)] != head or len(system) != len(head) + 1:
            found.append("the note does not follow the system prompt as it stands")
        if notes != 1:
            found.append("the note is sent twice")
    elif any(note in part for part in texts(last)):  # the application's turn, after an
        # assistant row or alone: one turn of its own, marked as the application's
        if texts(last) != [f"[Application instruction]\n{note}"]:
            found.append(f"the note's turn is not the application's alone: {texts(last)}")
        if len(turns) > 1 and role_of(kind, turns[-2]) == "user":
            found.append("the note's turn follows a user turn the body could have ended on")
    elif reply.content.strip():
        found.append("the reply's text is not sent")
    expected = "" if notes else reply.content
    if trimmed != expected:
        found.append(f"continueTrimmed {trimmed!r}, expected {expected!r}")
    return found


@pytest.mark.parametrize(("kind", "model"), ROUTES, ids=[f"{k}-{m}" for k, m in ROUTES])
def test_every_interrupted_reply_is_continued_as_the_target_takes_it(
    kind: str, model: str | None
) -> None:
    failures = [
        f"{system}/{before}/{reply}: {problem}"
        for system, head in SYSTEMS.items()
        for before, rows in BEFORE.items()
        for reply, row in REPLIES.items()
        for problem in problems(kind, model, [*head, *rows], row)
    ]
    assert failures == []
