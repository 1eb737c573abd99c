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
from test_providers_golden import carrier, msg, result
from test_providers_sdk import sdk_problems

from chat_history.model import Message, ToolCall
from chat_history.providers import format_body
from chat_history.providers.calls import function_name


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


# -- 15. Gemini 3 by the names Google documents ---------------------------------------------------

SKIP = "skip_thought_signature_validator"
VERTEX = "projects/my-project/locations/global/publishers/google/models/gemini-3-pro-preview"


@pytest.mark.parametrize(
    ("model", "generation"),
    [
        ("gemini-flash-latest", 3),
        ("gemini-pro-latest", 3),
        ("gemini-flash-lite-latest", 3),
        ("models/gemini-flash-latest", 3),
        (VERTEX, 3),
        ("publishers/google/models/gemini-3-flash-preview", 3),
        ("models/gemini-3.1-pro-preview", 3),
        ("google/gemini-3-pro-preview", 3),
        ("gemini-3-pro-preview@001", 3),
        (" GEMINI-FLASH-LATEST ", 3),
        ("gemini-2.5-flash-latest", 2),
        ("projects/p/locations/l/publishers/google/models/gemini-2.5-pro", 2),
        ("gemini-1.5-pro-latest", 1),
        ("gemini-pro", None),
        ("gemini-exp-1206", None),
        ("tunedModels/my-model", None),
        ("latest", None),
        (None, None),
    ],
)
def test_how_a_gemini_model_name_maps_to_a_generation(model: str | None, generation: int) -> None:
    from chat_history.providers.gemini import generation as generation_of

    assert generation_of(model) == generation


def current_step() -> list[Message]:
    return [msg("user", "go"), carrier("c1", "c2"), result("c1"), result("c2")]


@pytest.mark.parametrize(
    "model", ["gemini-flash-latest", "gemini-pro-latest", "gemini-flash-lite-latest", VERTEX]
)
def test_gemini_3_aliases_and_paths_get_the_placeholder(model: str) -> None:
    contents = accepted("gemini", current_step(), model)["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == SKIP
    assert "thoughtSignature" not in contents[1]["parts"][1]


# -- 16. call ids for Gemini 3 and later only ------------------------------------------------------


def call_ids(body: dict[str, Any]) -> list[Any]:
    return [
        part[key].get("id")
        for content in body["contents"]
        for part in content["parts"]
        for key in ("functionCall", "functionResponse")
        if key in part
    ]


@pytest.mark.parametrize(
    "model", [None, "gemini-2.5-flash", "gemini-2.0-flash", "models/gemini-2.5-pro", "gemini-pro"]
)
def test_gemini_2_and_unnamed_models_get_no_call_ids(model: str | None) -> None:
    body = accepted("gemini", current_step(), model)
    assert call_ids(body) == [None, None, None, None]
    assert '"id"' not in str(body).replace("'", '"')


@pytest.mark.parametrize("model", ["gemini-3-pro-preview", "gemini-flash-latest", VERTEX])
def test_gemini_3_gets_each_calls_id_on_the_call_and_its_response(model: str) -> None:
    body = accepted("gemini", current_step(), model)
    assert call_ids(body) == ["c1", "c2", "c1", "c2"]


# -- 17. a Mistral body ending with the assistant's text is a continuation -------------------------


ENDINGS = {
    "reply": [msg("user", "hi"), msg("assistant", "Hello, I")],
    "after tools": [msg("user", "go"), carrier("c1"), result("c1"), msg("assistant", "So far")],
    "alone": [msg("assistant", "Once upon")],
    "text and calls": [msg("user", "go"), carrier("c1", content="Reading."), result("c1")],
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_mistral_body_ending_with_the_assistant_is_a_continuation(ending: str) -> None:
    from test_providers_sdk import (
        MISTRAL_VERSIONS,
        assert_sent_as_formatted,
        mistral_common_problems,
    )

    body = accepted("mistral", ENDINGS[ending])  # mistral-common at every version, as it is
    last = body["messages"][-1]
    if last["role"] == "assistant":
        assert last["prefix"] is True and last["content"]
        unmarked = {
            "messages": [*body["messages"][:-1], {k: v for k, v in last.items() if k != "prefix"}]
        }
        problems = mistral_common_problems(unmarked)
        assert len(problems) == len(MISTRAL_VERSIONS)
        assert all("Expected last role User or Tool" in p for p in problems)
        assert violations("mistral", unmarked) != []
    assert all("prefix" not in m for m in body["messages"][:-1])
    assert_sent_as_formatted("mistral", body)


def test_a_prefix_anywhere_but_last_is_refused_by_the_checkers() -> None:
    from test_providers_sdk import mistral_common_problems

    body = accepted("mistral", ENDINGS["reply"])
    body["messages"].append({"role": "user", "content": "and?"})
    assert violations("mistral", body) != []
    assert mistral_common_problems(body) != []
