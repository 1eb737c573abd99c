"""Edge cases a second, independent converter exposed (issue 17), each as a body written by hand
from the provider's documentation and checked by the rule checker and the SDK validators:

1. Gemini 3: current-turn function calls without a stored signature get Google's documented
   ``skip_thought_signature_validator`` placeholder (first ``functionCall`` part of each step);
   stored signatures, earlier turns and Gemini 2.x are untouched.
2. Mistral: a history that opens with the assistant gets a ``(continued)`` user message first,
   as mistral-common's validators (every version) require.
3. A system row after the assistant's last reply travels, for every kind, as a user turn
   ``[Application instruction]\\n<text>``, so no body ends on an assistant turn read as a prefill.

Plus the rule checker accepting what the providers accept (no stricter than they are).
"""

from __future__ import annotations

import copy
import hashlib
import json
import string
from typing import Any

import pytest
from provider_rules import violations
from test_providers_golden import PNG, carrier, msg, result
from test_providers_sdk import (
    MISTRAL_VERSIONS,
    TEXT_ONLY_VERSIONS,
    assert_sent_as_formatted,
    mistral_common_problems,
    sdk_problems,
)

from chat_history.model import Message, ToolCall
from chat_history.providers import KINDS, format_body
from chat_history.providers.gemini import needs_signatures

SKIP = "skip_thought_signature_validator"


def accepted(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    """The body, after the rule checker and the SDK of ``kind`` accepted it."""
    body = format_body(kind, rows, model)
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    return body


def mistral_id(call_id: str) -> str:
    # As documented in the mistral module: the first 9 base-62 digits (0-9, a-z, A-Z, least
    # significant first) of the SHA-256 of the stored id.
    alphabet = string.digits + string.ascii_letters
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest(), "big")
    out = ""
    for _ in range(9):
        number, digit = divmod(number, 62)
        out += alphabet[digit]
    return out


# ---------------------------------------------------------------------------------------------
# 1. Gemini 3 thought signatures


def weather(provider_data: dict[str, Any] | None = None) -> list[Message]:
    """The issue's history: two parallel calls made by another provider, both answered."""
    calls = (
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
    )
    return [
        msg("user", "Weather in Paris and Rome?"),
        msg("assistant", tool_calls=calls, provider_data=provider_data or {}),
        result("call_a", "18C, sunny", name="get_weather"),
        result("call_b", "24C, clear", name="get_weather"),
    ]


def weather_contents(first_signature: str | None, *, ids: bool = True) -> list[dict[str, Any]]:
    """The contents for ``weather()``: call ids only for Gemini 3 and later (``ids``)."""

    def with_id(call_id: str, value: dict[str, Any]) -> dict[str, Any]:
        return {"id": call_id, **value} if ids else value

    first: dict[str, Any] = {
        "functionCall": with_id("call_a", {"name": "get_weather", "args": {"city": "Paris"}})
    }
    if first_signature is not None:
        first["thoughtSignature"] = first_signature
    return [
        {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
        {
            "role": "model",
            "parts": [
                first,
                {
                    "functionCall": with_id(
                        "call_b", {"name": "get_weather", "args": {"city": "Rome"}}
                    )
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": with_id(
                        "call_a", {"name": "get_weather", "response": {"output": "18C, sunny"}}
                    )
                },
                {
                    "functionResponse": with_id(
                        "call_b", {"name": "get_weather", "response": {"output": "24C, clear"}}
                    )
                },
            ],
        },
    ]


def test_gemini_3_parallel_calls_without_a_signature_get_the_placeholder_on_the_first_part() -> (
    None
):
    body = accepted("gemini", weather(), "gemini-3-pro-preview")
    assert body == {"contents": weather_contents(SKIP)}
    # the literal string reaches the wire (the API refuses it base64-encoded)
    assert_sent_as_formatted("gemini", body)


@pytest.mark.parametrize("model", [None, "gemini-2.5-flash", "gemini-2.0-flash", "gemini-1.5-pro"])
def test_gemini_2_and_unnamed_models_are_untouched(model: str | None) -> None:
    assert accepted("gemini", weather(), model) == {"contents": weather_contents(None, ids=False)}


def test_a_stored_turn_signature_is_kept_and_no_placeholder_is_added() -> None:
    rows = weather({"gemini": {"thoughtSignature": "c2lnLXJlYWw="}})
    body = accepted("gemini", rows, "gemini-3-pro-preview")
    assert body == {"contents": weather_contents("c2lnLXJlYWw=")}


def test_a_stored_per_call_signature_is_never_replaced() -> None:
    rows = weather({"gemini": {"thoughtSignatures": {"call_a": "c2lnLWE="}}})
    parts = accepted("gemini", rows, "gemini-3-flash")["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == ["c2lnLWE=", None]


def test_a_signature_stored_only_for_a_later_call_leaves_the_first_part_to_the_placeholder() -> (
    None
):
    rows = weather({"gemini": {"thoughtSignatures": {"call_b": "c2lnLWI="}}})
    parts = accepted("gemini", rows, "gemini-3-pro-preview")["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == [SKIP, "c2lnLWI="]


def sequential() -> list[Message]:
    """A finished turn with a call, then a current turn of three sequential steps, the middle
    one signed by Gemini."""
    return [
        msg("user", "Read a.py"),
        carrier("old"),
        result("old"),
        msg("assistant", "Done."),
        msg("user", "Now fix the tests."),
        carrier("s1"),
        result("s1"),
        carrier("s2", provider_data={"gemini": {"thoughtSignature": "c2lnLTI="}}),
        result("s2"),
        carrier("s3a", "s3b", content="Two more checks."),
        result("s3a"),
        result("s3b"),
    ]


def signatures(contents: list[dict[str, Any]]) -> list[list[str | None]]:
    """Per model content, the signature of each functionCall part."""
    return [
        [p.get("thoughtSignature") for p in c["parts"] if "functionCall" in p]
        for c in contents
        if c["role"] == "model" and any("functionCall" in p for p in c["parts"])
    ]


def test_every_step_of_the_current_turn_is_signed_and_earlier_turns_are_not() -> None:
    contents = accepted("gemini", sequential(), "gemini-3-pro-preview")["contents"]
    assert signatures(contents) == [
        [None],  # the finished turn: the API does not check it
        [SKIP],
        ["c2lnLTI="],
        [SKIP, None],  # parallel calls: only the first part carries one
    ]


def test_gemini_2_sequential_calls_are_untouched() -> None:
    contents = accepted("gemini", sequential(), "gemini-2.5-pro")["contents"]
    assert signatures(contents) == [[None], [None], ["c2lnLTI="], [None, None]]


def test_a_history_opening_with_calls_signs_them_after_the_continued_opener() -> None:
    rows = [carrier("c1"), result("c1")]
    contents = accepted("gemini", rows, "gemini-3-pro-preview")["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": "(continued)"}]}
    assert signatures(contents) == [[SKIP]]


def test_an_interrupted_step_before_merged_user_text_still_counts_as_current() -> None:
    # The results and the new prompt share one user content: the calls before it are signed
    # (a placeholder the API does not need is harmless; a missing one is a 400).
    rows = [msg("user", "go"), carrier("c1"), result("c1"), msg("user", "never mind")]
    contents = accepted("gemini", rows, "gemini-3-pro-preview")["contents"]
    assert signatures(contents) == [[SKIP]]


@pytest.mark.parametrize(
    ("model", "needs"),
    [
        ("gemini-3-pro-preview", True),
        ("gemini-3-flash", True),
        ("gemini-3.1-pro-preview", True),
        ("models/gemini-3-pro-preview", True),
        ("Gemini-3-Pro", True),
        ("gemini-4", True),
        ("gemini-2.5-pro", False),
        ("gemini-2.0-flash-001", False),
        ("gemini-1.5-flash", False),
        ("gemini-exp-1206", False),
        ("gemini-pro-latest", True),
        ("", False),
        (None, False),
    ],
)
def test_which_models_need_signatures(model: str | None, needs: bool) -> None:
    assert needs_signatures(model) is needs


# ---------------------------------------------------------------------------------------------
# 2. Mistral: a history that opens with the assistant


def assistant_first() -> list[Message]:
    """The issue's history: no system or user row before the assistant's call."""
    return [
        carrier("call_c", name="read_file"),
        result("call_c", "print(1)", name="read_file"),
        msg("assistant", "It prints 1."),
        msg("user", "and b.py?"),
    ]


def assistant_first_messages() -> list[dict[str, Any]]:
    call_id = mistral_id("call_c")
    return [
        {"role": "user", "content": "(continued)"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"n":0}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": "read_file", "content": "print(1)"},
        {"role": "assistant", "content": "It prints 1."},
        {"role": "user", "content": "and b.py?"},
    ]


def test_mistral_opens_an_assistant_first_history_with_a_continued_user() -> None:
    body = accepted("mistral", assistant_first())
    assert body == {"messages": assistant_first_messages()}
    assert_sent_as_formatted("mistral", body)


def test_mistral_common_refuses_the_old_shape_at_every_version() -> None:
    # Without the opener (the body before this fix) every validator version refuses it, so the
    # acceptance above is the validators' verdict, not a blind spot.
    old = {"messages": assistant_first_messages()[1:]}
    problems = mistral_common_problems(old)
    assert len(problems) == len(MISTRAL_VERSIONS)
    assert any("Unexpected tool call id" in p for p in problems)
    assert any("Not the same number of function calls and responses" in p for p in problems)
    assert violations("mistral", old) != []  # the rule checker agrees


def test_mistral_opens_after_the_system_messages() -> None:
    rows = [msg("system", "Be brief."), *assistant_first()]
    messages = accepted("mistral", rows)["messages"]
    assert messages == [{"role": "system", "content": "Be brief."}, *assistant_first_messages()]


def test_mistral_history_opening_with_an_orphan_tool_row() -> None:
    # A tool row whose call was cut off is swept; what is left opens with the assistant.
    rows = [result("gone", "lost"), msg("assistant", "Anything else?"), msg("user", "no")]
    assert accepted("mistral", rows)["messages"] == [
        {"role": "user", "content": "(continued)"},
        {"role": "assistant", "content": "Anything else?"},
        {"role": "user", "content": "no"},
    ]


@pytest.mark.parametrize("kind", ["anthropic", "bedrock", "gemini", "mistral"])
def test_kinds_that_want_a_user_first_all_open_with_the_same_continued_row(kind: str) -> None:
    body = accepted(kind, assistant_first())
    first = (body.get("messages") or body["contents"])[0]
    assert first["role"] == "user"
    assert "(continued)" in str(first)


def test_mistral_names_that_do_not_fit_are_mapped_for_call_and_result_alike() -> None:
    calls = (ToolCall(id="c1", name="web search", arguments={}),)
    rows = [msg("user", "go"), msg("assistant", tool_calls=calls), result("c1", name="web search")]
    messages = accepted("mistral", rows)["messages"]
    sent = mapped_name("web search")
    assert sent.startswith("web_search_")
    assert messages[1]["tool_calls"][0]["function"]["name"] == sent
    assert messages[2]["name"] == sent


def mapped_name(name: str) -> str:
    # As documented in calls.function_name: the cleaned head (51 characters at most), "_" and
    # the first 12 hex digits of the SHA-256 of the name.
    head = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in name)
    return f"{head[:51] or 'tool'}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"


@pytest.mark.parametrize("kind", ["mistral", "bedrock"])
@pytest.mark.parametrize("name", ["shell.exec", "多", "x" * 70, "ok-name_1", "", "a b/c"])
def test_names_outside_the_function_name_pattern_are_mapped(kind: str, name: str) -> None:
    # mistral-common and Converse's ToolName take [a-zA-Z0-9_-]{1,64} only
    calls = (ToolCall(id="c1", name=name, arguments={}),)
    rows = [msg("user", "go"), msg("assistant", tool_calls=calls), result("c1", name=name)]
    text = str(accepted(kind, rows))
    fits = 0 < len(name) <= 64 and name == "".join(
        c for c in name if c.isascii() and (c.isalnum() or c in "_-")
    )
    sent = name if fits else mapped_name(name)
    assert len(sent) <= 64
    assert repr(sent) in text
    if sent != name and name:
        assert repr(name) not in text


def test_the_rule_checker_refuses_a_bedrock_tool_name_the_service_model_refuses() -> None:
    body = accepted("bedrock", [msg("user", "go"), carrier("c1"), result("c1")])
    body["messages"][1]["content"][0]["toolUse"]["name"] = "shell.exec"
    assert violations("bedrock", body) != []


def test_mistral_common_runs_every_version_on_a_text_only_body() -> None:
    # The text-only versions are left out only for a body with images; here a broken body is
    # refused by every version, the text-only ones included.
    body = accepted("mistral", [msg("user", "hi"), carrier("c1"), result("c1")])
    broken = copy.deepcopy(body)
    broken["messages"].pop()  # the call's result is gone
    problems = mistral_common_problems(broken)
    assert [p.split(":")[0] for p in problems] == [
        f"mistral-common {v.value}" for v in MISTRAL_VERSIONS
    ]
    assert TEXT_ONLY_VERSIONS & set(MISTRAL_VERSIONS)


# ---------------------------------------------------------------------------------------------
# 3. A system row after the assistant's reply

TRAILING = [
    msg("system", "You are terse."),
    msg("user", "Hi"),
    msg("assistant", "Hello."),
    msg("system", "Answer in French from now on."),
]
INSTRUCTION = "[Application instruction]\nAnswer in French from now on."

TRAILING_BODIES: dict[str, dict[str, Any]] = {
    "openai": {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": INSTRUCTION},
        ]
    },
    "openai-responses": {
        "instructions": "You are terse.",
        "input": [
            {"type": "message", "role": "user", "content": "Hi"},
            {"type": "message", "role": "assistant", "content": "Hello."},
            {"type": "message", "role": "user", "content": INSTRUCTION},
        ],
    },
    "anthropic": {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
            {"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]},
        ],
    },
    "gemini": {
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"text": "Hello."}]},
            {"role": "user", "parts": [{"text": INSTRUCTION}]},
        ],
    },
    "ollama": {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": INSTRUCTION},
        ]
    },
    "mistral": {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": INSTRUCTION},
        ]
    },
    "bedrock": {
        "system": [{"text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [{"text": "Hi"}]},
            {"role": "assistant", "content": [{"text": "Hello."}]},
            {"role": "user", "content": [{"text": INSTRUCTION}]},
        ],
    },
    "cohere": {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": INSTRUCTION},
        ]
    },
}


def test_every_kind_has_a_trailing_instruction_body() -> None:
    assert sorted(TRAILING_BODIES) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_trailing_system_row_travels_as_an_application_instruction(kind: str) -> None:
    body = accepted(kind, TRAILING)
    assert body == TRAILING_BODIES[kind]
    assert_sent_as_formatted(kind, body)


def last_turn(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    turns: list[dict[str, Any]] = body.get("messages") or body.get("input") or body["contents"]
    return turns[-1]


@pytest.mark.parametrize("kind", KINDS)
def test_several_trailing_system_rows_become_one_instruction(kind: str) -> None:
    rows = [*TRAILING, msg("system", "  "), msg("system", "Keep it short.")]
    last = last_turn(kind, accepted(kind, rows))
    assert last["role"] == "user"
    expected = "[Application instruction]\nAnswer in French from now on.\n\nKeep it short."
    assert expected in str(last).replace("\\n", "\n")


@pytest.mark.parametrize("kind", KINDS)
def test_a_trailing_instruction_after_a_tool_using_reply_follows_the_reply(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1"), result("c1"), msg("assistant", "Done."), TRAILING[-1]]
    last = last_turn(kind, accepted(kind, rows))
    assert last["role"] == "user" and "[Application instruction]" in str(last)


@pytest.mark.parametrize("kind", ["anthropic", "bedrock", "gemini"])
def test_system_rows_elsewhere_stay_in_place_too(kind: str) -> None:
    # after a user prompt, after tool results, and mid-conversation: the same labelled
    # instruction in place (issue 35: folded into the top level, they changed the cached head)
    for rows in (
        [msg("user", "hi"), msg("system", "S")],
        [msg("user", "go"), carrier("c1"), result("c1"), msg("system", "S")],
        [msg("user", "hi"), msg("assistant", "yo"), msg("system", "S"), msg("user", "more")],
    ):
        body = accepted(kind, rows)
        assert "[Application instruction]\\nS" in json.dumps(body)
        assert "system" not in body and "systemInstruction" not in body


@pytest.mark.parametrize("kind", ["openai", "ollama", "cohere"])
def test_chat_kinds_keep_a_system_row_after_a_user_prompt_in_place(kind: str) -> None:
    body = accepted(kind, [msg("user", "hi"), msg("system", "S")])
    assert body["messages"][-1] == {"role": "system", "content": "S"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_history_of_only_system_rows_stays_system(kind: str) -> None:
    assert "[Application instruction]" not in str(accepted(kind, [msg("system", "S")]))


def test_a_history_opening_with_the_assistant_and_a_trailing_system_row() -> None:
    rows = [msg("assistant", "Welcome back."), msg("system", "Be brief.")]
    assert accepted("anthropic", rows)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "(continued)"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Welcome back."}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "[Application instruction]\nBe brief."}],
        },
    ]


# ---------------------------------------------------------------------------------------------
# 4. The rule checker is as strict as the providers, not stricter: shapes the APIs and SDK types
#    accept pass both; the ones they refuse fail both.


def _anthropic_system_blocks() -> dict[str, Any]:
    body = format_body("anthropic", [msg("system", "S"), msg("user", "hi")])
    body["system"] = [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    return body


def _mistral_image_object() -> dict[str, Any]:
    return {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            }
        ]
    }


def _bedrock_blank_result_text() -> dict[str, Any]:
    body = format_body("bedrock", [msg("user", "go"), carrier("c1"), result("c1", "x")])
    body["messages"][2]["content"][0]["toolResult"]["content"] = [{"text": ""}]
    return body


def _gemini_placeholder() -> dict[str, Any]:
    return format_body("gemini", weather(), "gemini-3-pro-preview")


ACCEPTED_SHAPES = {
    "anthropic: system as text blocks": ("anthropic", _anthropic_system_blocks),
    "mistral: image_url as {url}": ("mistral", _mistral_image_object),
    "bedrock: blank text inside a toolResult": ("bedrock", _bedrock_blank_result_text),
    "gemini: the literal signature placeholder": ("gemini", _gemini_placeholder),
}


@pytest.mark.parametrize("shape", sorted(ACCEPTED_SHAPES))
def test_the_rule_checker_accepts_what_the_provider_accepts(shape: str) -> None:
    kind, build = ACCEPTED_SHAPES[shape]
    body = build()
    assert sdk_problems(kind, body) == []
    assert violations(kind, body) == []


def _anthropic_blank_system_block(body: dict[str, Any]) -> None:
    body["system"] = [{"type": "text", "text": " "}]


def _mistral_image_object_extra_key(body: dict[str, Any]) -> None:
    body["messages"][0]["content"][1]["image_url"]["bogus"] = 1


def _mistral_bad_function_name(body: dict[str, Any]) -> None:
    body["messages"][2]["tool_calls"][0]["function"]["name"] = "web search"


def _mistral_calls_first(body: dict[str, Any]) -> None:
    del body["messages"][0]


REFUSED_SHAPES = {
    "anthropic: blank system text block": (
        "anthropic",
        _anthropic_system_blocks,
        _anthropic_blank_system_block,
    ),
    "mistral: unknown key in image_url": (
        "mistral",
        _mistral_image_object,
        _mistral_image_object_extra_key,
    ),
    "mistral: function name with a space": (
        "mistral",
        lambda: format_body(
            "mistral", [msg("user", "hi"), msg("assistant", "x"), carrier("c1"), result("c1")]
        ),
        _mistral_bad_function_name,
    ),
    "mistral: conversation opening with calls": (
        "mistral",
        lambda: format_body("mistral", assistant_first()),
        _mistral_calls_first,
    ),
}


@pytest.mark.parametrize("shape", sorted(REFUSED_SHAPES))
def test_the_rule_checker_and_the_sdk_refuse_what_the_provider_refuses(shape: str) -> None:
    kind, build, mutate = REFUSED_SHAPES[shape]
    body = build()
    assert violations(kind, body) == [] and sdk_problems(kind, body) == []
    mutate(body)
    assert violations(kind, body) != []
    if kind == "mistral":  # mistral-common checks these; Anthropic's types do not see blanks
        assert sdk_problems(kind, body) != []
