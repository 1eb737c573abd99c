"""Provider bodies, third hardening round (issue 22 items 14-17), each checked by the rule
checker and the SDK validators:

14. Mistral and Bedrock tool names stay distinct (a hash suffix on names that had to change),
    the same in every request and for a call and its result.
15. Gemini 3 under the names Google documents for it (floating aliases, Vertex paths, prefixes)
    gets the thought-signature placeholder.
16. ``functionCall.id``/``functionResponse.id`` only for Gemini 3 and later.
17. A Mistral body that ends with the assistant's text is a continuation (``prefix: true``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_rules import violations
from test_providers_golden import msg, result
from test_providers_sdk import sdk_problems

from chat_history.model import Message, ToolCall
from chat_history.providers import format_body
from chat_history.providers.common import function_name


def accepted(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    body = format_body(kind, rows, model)
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    return body


def exchange(call_id: str, name: str) -> list[Message]:
    calls = (ToolCall(id=call_id, name=name, arguments={}),)
    return [
        msg("user", f"use {name}"),
        msg("assistant", tool_calls=calls),
        result(call_id, f"out of {name}", name=name),
        msg("assistant", "done"),
    ]


def sent_names(kind: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The names of the calls and of the results, in body order."""
    calls: list[str] = []
    results: list[str] = []
    for message in body["messages"]:
        if kind == "mistral":
            calls.extend(c["function"]["name"] for c in message.get("tool_calls") or [])
            if message["role"] == "tool":
                results.append(message["name"])
        else:
            for block in message["content"]:
                if "toolUse" in block:
                    calls.append(block["toolUse"]["name"])
    return calls, results


# -- 14. tool names ------------------------------------------------------------------------------

LONG = "t" * 64


@pytest.mark.parametrize("kind", ["mistral", "bedrock"])
@pytest.mark.parametrize(
    "names",
    [("a.b", "a_b"), ("a.b", "a b"), (LONG + "x", LONG + "y"), (LONG, LONG + "y"), ("", "tool")],
)
def test_names_that_clean_alike_stay_apart_in_one_body(kind: str, names: tuple[str, str]) -> None:
    first, second = names
    body = accepted(kind, [*exchange("c1", first), *exchange("c2", second)])
    calls, results = sent_names(kind, body)
    assert len(set(calls)) == 2
    if kind == "mistral":
        assert results == calls  # a result carries its call's name


@pytest.mark.parametrize("kind", ["mistral", "bedrock"])
def test_a_name_maps_alike_in_every_request(kind: str) -> None:
    alone = accepted(kind, exchange("c1", "shell.exec"))
    crowded = accepted(kind, [*exchange("c0", "shell_exec"), *exchange("c1", "shell.exec")])
    assert sent_names(kind, alone)[0] == [function_name("shell.exec")]
    assert sent_names(kind, crowded)[0] == ["shell_exec", function_name("shell.exec")]


NAME_TEXT = st.text(alphabet=st.sampled_from("ab_.- é/"), max_size=70)


@settings(max_examples=300, deadline=None)
@given(first=NAME_TEXT, second=NAME_TEXT)
def test_the_name_mapping_is_injective_and_fits(first: str, second: str) -> None:
    for name in (first, second):
        mapped = function_name(name)
        assert 1 <= len(mapped) <= 64
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in mapped)
    if first != second:
        assert function_name(first) != function_name(second)
