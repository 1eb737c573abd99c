"""The provider state rule table (providers.state_rules; protocol.md "Version 5" → Provider state
that stays valid): each piece of state goes only where its origin's kind, endpoint and scope
and its rule's model family match, never where a report fenced it, and what a target may not
take leaves the body while everything it may take stays, byte for byte."""

from __future__ import annotations

from typing import Any

import attrs

from chat_history.model import Fence, Message, Origin, StoredMessage, ToolCall
from chat_history.policy.budget import Route
from chat_history.policy.origins import PUBLIC_ENDPOINTS, endpoint_of, origin
from chat_history.policy.sweep import sweep_orphans
from chat_history.providers import format_body
from chat_history.providers.gemini import SKIP_SIGNATURE
from chat_history.providers.state_rules import (
    BY_NAME,
    COMPACTION_RULES,
    RULES,
    Target,
    claude_state_family,
    fence,
    fence_of,
    gemini_family,
    sent_states,
)

SIGNED = {"type": "thinking", "thinking": "Let me look.", "signature": "c2lnbmVk"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
SONNET = "claude-sonnet-4-5-20250929"


def target(
    kind: str, model: str | None = None, endpoint: str | None = None, scope: str | None = None
) -> Target:
    return Target.of(Route(kind, kind, model, None, endpoint, scope))


def thinking_row(made: Origin | None, **kw: Any) -> Message:
    return Message(
        role="assistant",
        content="Here it is.",
        provider_data={"anthropic": {"thinking": [SIGNED, REDACTED]}},
        origin=made,
        **kw,
    )


def thinking_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    ]


def anthropic_body(rows: list[Message], to: Target, **kw: Any) -> dict[str, Any]:
    return format_body(
        "anthropic", [Message(role="user", content="hi"), *rows], to.model, target=to, **kw
    )


# -- targets and origins ------------------------------------------------------------------------


def test_a_bare_kind_is_its_public_api_with_no_scope() -> None:
    assert target("anthropic") == Target("anthropic", None, PUBLIC_ENDPOINTS["anthropic"], None)
    assert origin("gemini").endpoint == "https://generativelanguage.googleapis.com"


def test_endpoints_are_compared_as_urls() -> None:
    assert endpoint_of("openai", "HTTPS://API.OpenAI.com/v1/") == PUBLIC_ENDPOINTS["openai"]
    assert endpoint_of("openai", " ") == PUBLIC_ENDPOINTS["openai"]
    assert endpoint_of("openai", "https://gw.example/v1/Path/") == "https://gw.example/v1/Path"
    assert endpoint_of("ollama", "my-label/") == "my-label"


def test_model_families_read_ids_as_providers_do() -> None:
    same = [
        SONNET,
        "claude-sonnet-4-5",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ]
    assert {claude_state_family(m) for m in same} == {"claude-sonnet-4-5"}
    assert claude_state_family("claude-opus-4-1") != claude_state_family(SONNET)
    assert claude_state_family("My-Proxy-Model ") == "my-proxy-model"
    assert gemini_family("models/gemini-3-pro-preview") == "gemini-3-pro"
    assert gemini_family("gemini-3-pro-preview-11-2025") == "gemini-3-pro"
    assert gemini_family("gemini-3-flash") != gemini_family("gemini-3-pro")
    assert gemini_family(None) is None


def test_every_rule_names_its_source_and_its_kind() -> None:
    for rule in (*RULES, *COMPACTION_RULES.values()):
        assert rule.source.strip(), rule.name
        assert rule.name.startswith(rule.kind + "."), rule.name
        assert BY_NAME[rule.name] is rule


# -- Anthropic thinking ----------------------------------------------------------------------------


def test_thinking_goes_back_to_where_it_was_minted_byte_for_byte() -> None:
    made = origin("anthropic", SONNET)
    body = anthropic_body([thinking_row(made)], target("anthropic", "claude-sonnet-4-5"))
    assert thinking_of(body) == [SIGNED, REDACTED]


def test_thinking_without_an_origin_keeps_version_4s_rule() -> None:
    for model in (None, "claude-opus-4-1"):
        assert thinking_of(anthropic_body([thinking_row(None)], target("anthropic", model))) == [
            SIGNED,
            REDACTED,
        ]


def test_thinking_stays_out_of_another_family_endpoint_or_scope() -> None:
    made = origin("anthropic", SONNET, "https://api.anthropic.com/", "team-a")
    row = thinking_row(made)
    kept = target("anthropic", SONNET, "https://api.anthropic.com", "team-a")
    assert thinking_of(anthropic_body([row], kept)) == [SIGNED, REDACTED]
    for refused in (
        target("anthropic", "claude-opus-4-1", None, "team-a"),
        target("anthropic", SONNET, "https://gateway.example/anthropic", "team-a"),
        target("anthropic", SONNET, None, "team-b"),
        target("anthropic", SONNET, None, None),
        target("anthropic", None, None, "team-a"),  # the model unknown: its rule cannot allow
    ):
        body = anthropic_body([row], refused)
        assert thinking_of(body) == [], refused
        assert body["messages"][-1]["content"] == [{"type": "text", "text": "Here it is."}]


def test_a_block_the_api_refuses_is_never_sent() -> None:
    unsigned = {"type": "thinking", "thinking": "no signature yet"}
    empty = {"type": "redacted_thinking", "data": ""}
    row = Message(
        role="assistant",
        content="ok",
        provider_data={"anthropic": {"thinking": [unsigned, SIGNED, empty, "junk"]}},
    )
    assert thinking_of(anthropic_body([row], target("anthropic", SONNET))) == [SIGNED]
    only_bad = attrs.evolve(row, provider_data={"anthropic": {"thinking": [unsigned]}})
    assert thinking_of(anthropic_body([only_bad], target("anthropic", SONNET))) == []


def test_a_reported_refusal_fences_that_target_only() -> None:
    made = origin("anthropic", SONNET)
    to = target("anthropic", SONNET)
    row = thinking_row(made, fences=(fence_of(BY_NAME["anthropic.thinking"], to),))
    assert thinking_of(anthropic_body([row], to)) == []
    other_scope = Origin(provider="anthropic", model=SONNET, endpoint=made.endpoint, scope="x")
    elsewhere = thinking_row(other_scope, fences=row.fences)
    assert thinking_of(anthropic_body([elsewhere], target("anthropic", SONNET, None, "x"))) == [
        SIGNED,
        REDACTED,
    ]


def test_thinking_from_before_a_summary_standing_in_stays_out() -> None:
    made = origin("anthropic", SONNET)
    old = thinking_row(made, timestamp=1_000)
    new = thinking_row(made, timestamp=3_000)
    to = target("anthropic", SONNET)
    assert thinking_of(anthropic_body([old], to, replaced_at=2_000)) == []
    assert thinking_of(anthropic_body([new], to, replaced_at=2_000)) == [SIGNED, REDACTED]
    assert thinking_of(anthropic_body([old], to)) == [SIGNED, REDACTED]


def test_a_carrier_the_sweep_changes_loses_its_state() -> None:
    carrier = Message(
        role="assistant",
        content="calling",
        tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="g")),
        provider_data={"anthropic": {"thinking": [SIGNED]}},
    )
    answered = Message(role="tool", content="A", tool_call_id="a")
    swept = sweep_orphans([Message(role="user", content="go"), carrier, answered])
    assert [c.id for c in swept[1].tool_calls] == ["a"]
    assert swept[1].provider_data == {}
    whole = sweep_orphans([carrier, answered, Message(role="tool", content="B", tool_call_id="b")])
    assert whole[0] is carrier


def test_rows_whose_state_is_kept_whole_are_the_same_objects() -> None:
    made = origin("anthropic", SONNET)
    rows = [Message(role="user", content="q"), thinking_row(made)]
    assert all(a is b for a, b in zip(fence(rows, target("anthropic", SONNET)), rows, strict=True))


# -- OpenAI Responses, Chat Completions ------------------------------------------------------------


def reasoning_row(made: Origin | None) -> Message:
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    return Message(
        role="assistant",
        content="done",
        provider_data={"openai-responses": {"reasoning": [item], "phase": "final_answer"}},
        origin=made,
    )


def responses_items(rows: list[Message], to: Target) -> list[dict[str, Any]]:
    body = format_body(
        "openai-responses", [Message(role="user", content="hi"), *rows], to.model, target=to
    )
    return list(body["input"])


def test_encrypted_reasoning_goes_to_the_organisation_that_minted_it_any_model() -> None:
    made = origin("openai-responses", "gpt-5.2", None, "org-1")
    for model in ("gpt-5.2", "gpt-5.3-codex", None):
        items = responses_items(
            [reasoning_row(made)], target("openai-responses", model, None, "org-1")
        )
        assert [i["type"] for i in items] == ["message", "reasoning", "message"]
    refused = responses_items(
        [reasoning_row(made)], target("openai-responses", "gpt-5.2", None, "org-2")
    )
    assert [i["type"] for i in refused] == ["message", "message"]
    assert refused[-1].get("phase") == "final_answer", "phase is no minted state"


def test_reasoning_content_goes_only_to_the_endpoint_that_produced_it() -> None:
    made = origin("openai", "deepseek-reasoner", "https://api.deepseek.com", None)
    row = Message(
        role="assistant",
        content="x",
        provider_data={"openai": {"reasoning_content": "hmm"}},
        origin=made,
    )
    rows = [Message(role="user", content="q"), row]
    kept = format_body(
        "openai", rows, target=target("openai", "deepseek-reasoner", "https://api.deepseek.com")
    )
    assert kept["messages"][-1]["reasoning_content"] == "hmm"
    groq = format_body(
        "openai", rows, target=target("openai", "deepseek-r1", "https://api.groq.com/openai/v1")
    )
    assert "reasoning_content" not in groq["messages"][-1]


# -- Gemini -----------------------------------------------------------------------------------


def gemini_rows(made: Origin | None, fences: tuple[Fence, ...] = ()) -> list[Message]:
    carrier = Message(
        role="assistant",
        content="",
        tool_calls=(ToolCall(id="c1", name="ls"),),
        provider_data={"gemini": {"thoughtSignatures": {"c1": "real-sig"}}},
        origin=made,
        fences=fences,
    )
    return [
        Message(role="user", content="list"),
        carrier,
        Message(role="tool", content="a.py", tool_call_id="c1", name="ls"),
    ]


def first_call_signature(body: dict[str, Any]) -> Any:
    model_turn = next(c for c in body["contents"] if c["role"] == "model")
    return model_turn["parts"][0].get("thoughtSignature")


def test_a_thought_signature_goes_to_the_same_model_else_the_placeholder_on_gemini_3() -> None:
    made = origin("gemini", "gemini-3-pro-preview")
    rows = gemini_rows(made)
    same = target("gemini", "models/gemini-3-pro-preview")
    assert first_call_signature(format_body("gemini", rows, same.model, target=same)) == "real-sig"
    other = target("gemini", "gemini-3-flash-preview")
    assert (
        first_call_signature(format_body("gemini", rows, other.model, target=other))
        == SKIP_SIGNATURE
    )
    older = target("gemini", "gemini-2.5-flash")
    assert first_call_signature(format_body("gemini", rows, older.model, target=older)) is None


def test_a_reported_gemini_refusal_puts_the_placeholder_on_that_row_for_any_model() -> None:
    to = target("gemini", "tuned-model-7")  # a name that names no generation
    reported = fence_of(BY_NAME["gemini.signatures"], to)
    for made in (origin("gemini", "tuned-model-7"), None):
        rows = gemini_rows(made, (reported,))
        assert (
            first_call_signature(format_body("gemini", rows, to.model, target=to)) == SKIP_SIGNATURE
        )
    unsigned = [
        attrs.evolve(r, provider_data={}) if r.role == "assistant" else r
        for r in gemini_rows(None, (reported,))
    ]
    assert (
        first_call_signature(format_body("gemini", unsigned, to.model, target=to)) == SKIP_SIGNATURE
    )


def test_sent_states_names_what_a_refusal_can_be_about() -> None:
    made = origin("anthropic", SONNET)
    row = StoredMessage.of(thinking_row(made), id=1, turn=1, tokens=1)
    assert sent_states(row, target("anthropic", SONNET)) == ["anthropic.thinking"]
    assert sent_states(row, target("anthropic", "claude-opus-4-1")) == []
    assert sent_states(row, target("openai")) == []
