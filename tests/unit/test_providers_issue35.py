"""Issue 35's provider items and issue 30's leftover, each on bodies checked by the rule checker
and the SDK validators:

- every kind module builds its body with ``build_body`` and none shadows a builtin (``format``
  did);
- a system row in mid-conversation leaves the bytes before it unchanged in every kind's body,
  and keeps system authority where the provider has a system position there;
- a cache marker never lands on a ``tool_result`` without content.
"""

from __future__ import annotations

import builtins
import importlib
import json
import pkgutil
from typing import Any

import pytest
from provider_rules import violations
from test_providers_golden import carrier, msg, result
from test_providers_sdk import assert_sent_as_formatted, mistral_common_problems, sdk_problems

import chat_history.providers as providers_package
from chat_history.model import Message
from chat_history.policy.prepare.compaction import note_of
from chat_history.providers import KINDS, format_body
from chat_history.providers.plan import APPLICATION_INSTRUCTION


def accepted(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    body = format_body(kind, rows, model)
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    return body


def marked(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    body = format_body(kind, rows, model, breakpoints=True, note=note_of(rows))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    return body


def test_kind_modules_build_bodies_and_shadow_no_builtin() -> None:
    names = [m.name for m in pkgutil.iter_modules(providers_package.__path__)]
    modules = {name: importlib.import_module(f"chat_history.providers.{name}") for name in names}
    for name, module in modules.items():
        shadowed = [n for n in vars(module) if n in vars(builtins) and not n.startswith("__")]
        assert shadowed == [], f"providers.{name} shadows {shadowed}"
    kind_modules = [m for m in modules.values() if hasattr(m, "KIND")]
    assert sorted(m.KIND for m in kind_modules) == sorted(KINDS)
    assert all(callable(m.build_body) for m in kind_modules)


def test_a_marker_never_lands_on_a_tool_result_without_content() -> None:
    rows = [
        msg("system", "Be brief."),
        msg("user", "Clean the build folder."),
        carrier("c1", content="Cleaning."),
        result("c1", ""),
    ]
    body = marked("anthropic", rows)
    final = body["messages"][-1]
    assert final["content"] == [{"type": "tool_result", "tool_use_id": "c1"}]
    # the final message has no block that may carry one; the rest keep theirs
    assert json.dumps(body).count("cache_control") == 2
    with_output = marked("anthropic", [*rows[:-1], result("c1", "removed 3 files")])
    assert with_output["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_an_empty_result_beside_one_with_output_passes_the_marker_to_it() -> None:
    rows = [
        msg("user", "Run both."),
        carrier("c1", "c2", content="Running."),
        result("c1", "3 passed"),
        result("c2", "   "),
    ]
    final = marked("anthropic", rows)["messages"][-1]["content"]
    assert "cache_control" not in final[1] and "content" not in final[1]
    assert final[0]["cache_control"] == {"type": "ephemeral"}
    assert_sent_as_formatted("anthropic", marked("anthropic", rows))


# ---------------------------------------------------------------------------------------------
# A system row in mid-conversation (issue 35 item 2)

TOP_LEVEL = {"anthropic": "system", "bedrock": "system", "gemini": "systemInstruction"}
MESSAGES = {"gemini": "contents", "openai-responses": "input"}


def _history() -> list[Message]:
    return [
        msg("system", "Be brief."),
        msg("user", "Add tests."),
        carrier("c1", content="Running them."),
        result("c1", "3 passed"),
        msg("assistant", "All pass."),
    ]


def _split(kind: str, body: dict[str, Any]) -> tuple[Any, list[Any]]:
    key = MESSAGES.get(kind, "messages")
    head = {k: v for k, v in body.items() if k != key}
    return head, body[key]


@pytest.mark.parametrize("kind", KINDS)
def test_a_later_system_row_leaves_the_bytes_before_it_unchanged(kind: str) -> None:
    before = _history()
    after = [*before, msg("system", "Answer in French from now on."), msg("user", "Now docs.")]
    head_before, sent_before = _split(kind, accepted(kind, before))
    head_after, sent_after = _split(kind, accepted(kind, after))
    assert head_after == head_before  # the system prompt did not change
    # every message but the last (a final assistant turn, which may be trimmed or marked as a
    # prefill) is sent again byte for byte, in the same place
    assert json.dumps(sent_after[: len(sent_before) - 1]) == json.dumps(sent_before[:-1])
    assert "Answer in French" in json.dumps(sent_after)


@pytest.mark.parametrize("kind", KINDS)
def test_the_later_system_row_keeps_the_authority_the_provider_offers_there(kind: str) -> None:
    rows = [*_history(), msg("system", "Answer in French."), msg("user", "Now docs.")]
    _, sent = _split(kind, accepted(kind, rows))
    holder = next(m for m in sent if "Answer in French" in json.dumps(m))
    if kind in TOP_LEVEL or kind == "mistral":
        # no system position after the assistant: the application's instruction, labelled
        assert holder["role"] == "user"
        assert f"{APPLICATION_INSTRUCTION}\\nAnswer in French." in json.dumps(holder)
    else:
        assert holder["role"] == "system"


def test_mistral_keeps_a_system_message_right_after_a_user_message() -> None:
    rows = [
        msg("system", "Be brief."),
        msg("user", "Add tests."),
        msg("system", "Use pytest."),
        msg("assistant", "Done."),
        msg("user", "Thanks."),
    ]
    sent = accepted("mistral", rows)["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "system", "assistant", "user"]
    assert sent[2]["content"] == "Use pytest."
    assert mistral_common_problems(accepted("mistral", rows)) == []


def test_a_trailing_instruction_is_the_same_bytes_once_the_prompt_follows() -> None:
    """The request right after the application appended its instruction (the row trails the
    reply) and the one after the user's next prompt share everything up to the instruction."""
    trailing = [*_history(), msg("system", "Answer in French.")]
    answered = [*trailing, msg("user", "Now docs.")]
    for kind in ("anthropic", "bedrock", "gemini"):
        _, first = _split(kind, accepted(kind, trailing))
        _, second = _split(kind, accepted(kind, answered))
        key = "parts" if kind == "gemini" else "content"
        assert second[: len(first) - 1] == first[:-1]
        assert second[len(first) - 1][key][: len(first[-1][key])] == first[-1][key]
