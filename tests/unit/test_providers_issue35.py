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

from provider_rules import violations
from test_providers_golden import carrier, msg, result
from test_providers_sdk import assert_sent_as_formatted, sdk_problems

import chat_history.providers as providers_package
from chat_history.model import Message
from chat_history.policy.compaction import note_of
from chat_history.providers import KINDS, format_body


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
