"""Prompt-cache breakpoints (protocol.md "Version 3" → Prompt caches), on bodies written by hand
from the spec and checked by the rule checker and the SDK validators: Anthropic
``cache_control`` and Bedrock ``cachePoint`` on the system prompt, the context note, the newest
user message before the final one and the final message; never more than 4, never on thinking
blocks, Bedrock only for the families that take them; other kinds unchanged; the cache key."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from provider_rules import violations
from test_providers_golden import carrier, msg, result
from test_providers_sdk import assert_sent_as_formatted, sdk_problems

from chat_history.model import Key, Message
from chat_history.policy.prepare.compaction import BREADCRUMB, SUMMARY_HEADER, note_of
from chat_history.providers import KINDS, format_body
from chat_history.providers.cache_points import bedrock_caches, cache_key, mark

EPHEMERAL = {"type": "ephemeral"}
POINT = {"cachePoint": {"type": "default"}}
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def marked(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    body = format_body(kind, rows, model, breakpoints=True, note=note_of(rows))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    return body


def with_note() -> list[Message]:
    """A prepared request's rows: system, the context note, two turns, the newest running."""
    return [
        msg("system", "Be brief."),
        msg("user", f"{BREADCRUMB}\n\n{SUMMARY_HEADER}The user builds a parser."),
        msg("user", "Add tests."),
        carrier("c1", content="Running them."),
        result("c1", "3 passed"),
        msg("assistant", "All pass."),
        msg("user", "Now the docs."),
    ]


def test_anthropic_marks_the_four_blocks_the_spec_names() -> None:
    rows = with_note()
    body = marked("anthropic", rows)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    first, _, results, _, final = body["messages"]
    note_text = rows[1].content
    assert first["content"] == [
        {"type": "text", "text": note_text, "cache_control": EPHEMERAL},
        {"type": "text", "text": "Add tests."},
    ]
    # the newest user message before the final one: the tool results
    assert results["content"][-1]["cache_control"] == EPHEMERAL
    assert final == {
        "role": "user",
        "content": [{"type": "text", "text": "Now the docs.", "cache_control": EPHEMERAL}],
    }
    assert json.dumps(body).count("cache_control") == 4
    assert_sent_as_formatted("anthropic", body)


def test_without_breakpoints_the_body_is_todays() -> None:
    rows = with_note()
    plain = format_body("anthropic", rows)
    assert "cache_control" not in json.dumps(plain)
    assert plain["system"] == "Be brief."


def test_a_marked_body_differs_from_todays_only_by_the_marks() -> None:
    rows = with_note()

    def unmarked(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [unmarked(v) for v in value if v != POINT]
        return value

    for kind, model in (("anthropic", None), ("bedrock", CLAUDE)):
        body = marked(kind, rows, model)
        plain = format_body(kind, rows, model)
        if kind == "anthropic":
            plain["system"] = [{"type": "text", "text": plain["system"]}]
        assert unmarked(body) == plain


def test_bedrock_puts_a_cache_point_after_the_same_blocks() -> None:
    rows = with_note()
    body = marked("bedrock", rows, CLAUDE)
    assert body["system"] == [{"text": "Be brief."}, POINT]
    first, _, results, _, final = body["messages"]
    assert first["content"] == [{"text": rows[1].content}, POINT, {"text": "Add tests."}]
    assert results["content"][-1] == POINT and "toolResult" in results["content"][-2]
    assert final["content"] == [{"text": "Now the docs."}, POINT]
    assert json.dumps(body).count("cachePoint") == 4
    assert_sent_as_formatted("bedrock", body)


#: AWS's prompt-caching guide (Supported models) and the Claude 5 model cards: these cache.
CACHING_MODELS = [
    "anthropic.claude-3-7-sonnet-20250219-v1:0",
    "anthropic.claude-3-5-haiku-20241022-v1:0",
    "anthropic.claude-sonnet-4-20250514-v1:0",
    "anthropic.claude-opus-4-20250514-v1:0",
    "anthropic.claude-opus-4-1-20250805-v1:0",
    CLAUDE,
    "anthropic.claude-haiku-4-5-20251001-v1:0",
    "global.anthropic.claude-opus-4-5-20251101-v1:0",
    "anthropic.claude-opus-5",
    "eu.anthropic.claude-sonnet-5",
    "amazon.nova-micro-v1:0",
    "amazon.nova-lite-v1:0",
    "apac.amazon.nova-pro-v1:0",
    "us.amazon.nova-premier-v1:0",
    "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-7-sonnet-20250219-v1:0",
    "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0",
    "arn:aws-us-gov:bedrock:us-gov-west-1:1:inference-profile/us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "US.Anthropic.Claude-Sonnet-4-5-20250929-V1:0",
]
#: Models Bedrock refuses a cache point for (or that name no model), and unknown ones.
UNCACHED_MODELS = [
    "anthropic.claude-3-haiku-20240307-v1:0",
    "us.anthropic.claude-3-haiku-20240307-v1:0",
    "anthropic.claude-3-sonnet-20240229-v1:0",
    "anthropic.claude-3-opus-20240229-v1:0",
    "anthropic.claude-3-5-sonnet-20240620-v1:0",
    "anthropic.claude-3-5-sonnet-20241022-v2:0",
    "anthropic.claude-v2:1",
    "anthropic.claude-instant-v1",
    "Anthropic.Claude-3-Haiku",
    "amazon.nova-sonic-v1:0",
    "amazon.nova-canvas-v1:0",
    "amazon.nova-reel-v1:0",
    "us.amazon.nova-2-lite-v1:0",
    "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6",
    "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/anthropic.claude-3-7-sonnet",
    "anthropic.claude-sonnet-40",
    "anthropic.claude-sonnet-6",
    "xx.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "meta.llama3-70b-instruct-v1:0",
    "mistral.mistral-large-2402-v1:0",
    "amazon.titan-text-express-v1",
    "us.deepseek.r1-v1:0",
    "",
    None,
]


@pytest.mark.parametrize(
    ("model", "caches"),
    [(m, True) for m in CACHING_MODELS] + [(m, False) for m in UNCACHED_MODELS],
)
def test_bedrock_marks_only_the_models_that_take_cache_points(
    model: str | None, caches: bool
) -> None:
    assert bedrock_caches(model) is caches
    body = marked("bedrock", with_note(), model)
    assert ("cachePoint" in json.dumps(body)) is caches
    if not caches:
        assert body == format_body("bedrock", with_note(), model)


def test_nova_never_puts_a_cache_point_right_after_a_tool_result() -> None:
    rows = with_note()
    claude = marked("bedrock", rows, CLAUDE)
    nova = marked("bedrock", rows, "us.amazon.nova-pro-v1:0")
    results = 2  # the tool results' user message, the newest user message before the final one
    assert claude["messages"][results]["content"][-1] == POINT
    assert POINT not in nova["messages"][results]["content"]
    for message in nova["messages"]:
        content = message["content"]
        for before, after in itertools.pairwise(content):
            assert not ("toolResult" in before and after == POINT)
    assert json.dumps(nova).count("cachePoint") == 3  # system, note, final message


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("anthropic", "bedrock")])
def test_other_kinds_get_no_marker(kind: str) -> None:
    rows = with_note()
    assert marked(kind, rows, CLAUDE) == format_body(kind, rows, CLAUDE)


def test_no_note_no_system_and_a_lone_prompt() -> None:
    body = marked("anthropic", [msg("user", "hi")])
    assert body == {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}],
            }
        ]
    }
    assert marked("bedrock", [msg("user", "hi")], CLAUDE) == {
        "messages": [{"role": "user", "content": [{"text": "hi"}, POINT]}]
    }


def test_a_stored_row_that_reads_like_a_note_is_not_the_note() -> None:
    from chat_history.model import StoredMessage

    stored = StoredMessage(
        role="user", content=BREADCRUMB, id=1, turn=0, tokens=3, timestamp=1, metadata={}
    )
    assert note_of([msg("system", "s"), stored]) is None
    fresh = msg("user", BREADCRUMB)
    assert note_of([msg("system", "s"), fresh]) is fresh
    assert note_of([msg("user", "hello"), fresh]) is None


def test_a_final_assistant_marks_its_last_block_that_is_not_thinking() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "c2ln"}
    rows = [
        msg("user", "go"),
        msg("assistant", "Partial", provider_data={"anthropic": {"thinking": [thinking]}}),
    ]
    body = marked("anthropic", rows)
    final = body["messages"][-1]["content"]
    assert final[0] == thinking and final[1]["cache_control"] == EPHEMERAL


@pytest.mark.parametrize(
    ("blocks", "marked_at"),
    [
        ([{"type": "text", "text": "a"}, {"type": "redacted_thinking", "data": "x"}], 0),
        ([{"type": "thinking", "thinking": "t", "signature": "s"}], None),
        (
            [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "redacted_thinking", "data": "x"},
            ],
            None,
        ),
    ],
)
def test_thinking_blocks_never_carry_a_mark(blocks: list[Any], marked_at: int | None) -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": blocks},
        ]
    }
    final = mark("anthropic", body, None, 0)["messages"][-1]["content"]
    places = [i for i, b in enumerate(final) if "cache_control" in b]
    assert places == ([] if marked_at is None else [marked_at])
    assert "cache_control" not in json.dumps(body)  # the input is not changed


def test_the_compaction_request_shape_is_marked_alike() -> None:
    # system, the note with the current summary, the span's turns, then the prompt
    rows = [
        msg("system", "Be brief."),
        msg("user", SUMMARY_HEADER + "Earlier work."),
        msg("user", "Add tests."),
        msg("assistant", "Done."),
        msg("user", "Summarize the conversation above."),
    ]
    body = marked("anthropic", rows)
    assert json.dumps(body).count("cache_control") == 4
    assert body["messages"][0]["content"][0]["cache_control"] == EPHEMERAL


def test_the_cache_key_is_per_conversation_and_hides_both_names() -> None:
    secret = bytes(range(32))
    one = cache_key(secret, Key("file:///ws", "chat-1"))
    assert one == cache_key(secret, Key("file:///ws", "chat-1"))
    others = {
        cache_key(secret, Key("file:///ws", "chat-2")),
        cache_key(secret, Key("file:///other", "chat-1")),
        cache_key(secret, Key("file:///ws\x00", "chat-1")),
        cache_key(secret, Key("file:///w", "s\x00chat-1")),
        cache_key(bytes(32), Key("file:///ws", "chat-1")),
    }
    assert one not in others and len(others) == 5
    assert len(one) == 32 and int(one, 16) >= 0
    assert "ws" not in one and "chat" not in one
