"""prepare's kept bodies (``service.body_memo``, issue 45): a prepare with nothing changed reuses
the body it rendered; every change of what a body is made of (the rows, by this process or
another; the route's kind, alias, model, endpoint and scope; the settings; a summary, a native
compaction, a fence) makes the next prepare answer what a fresh server answers; the memo is
bounded and let go at rest."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from state_oracle import Registry, compaction_items, reply
from state_oracle import settings as oracle_settings

from chat_history.model import Follow, Key, Message, ToolCall
from chat_history.policy.origins import alias_origin
from chat_history.service import branches, edits, history, import_writes, provider_state
from chat_history.service.body_memo import BodyMemo
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PreparedRequest, PrepareOptions
from chat_history.settings import Settings

KEY = Key("ws", "bodies")
pytestmark = pytest.mark.engines
MakeManager = Callable[..., ChatHistoryManager]


def settings(**context: Any) -> Settings:
    return oracle_settings(
        maxMessages=1_000, maxTokens=0, maxAgeHours=0, context={"promptCache": "auto", **context}
    )


SETTINGS = settings()


def history_rows() -> list[Message]:
    registry = Registry()
    rows: list[Message] = []
    for n in range(6):
        call = ToolCall(id=f"call_{n}", name="read", arguments={"path": f"f{n}.py"})
        rows += [
            Message(role="user", content=f"question {n} " + "q" * 200),
            reply(registry, "sonnet", f"m{n}", "reading", calls=[call], at=1_000 + n),
            Message(role="tool", content=f"output {n} " + "o" * 200, tool_call_id=call.id),
            reply(registry, "sonnet", f"a{n}", "answer " * 30, at=1_000 + n),
        ]
    return rows


def prepare(
    manager: ChatHistoryManager, provider: str = "sonnet", **options: Any
) -> PreparedRequest:
    return history.prepare(manager, KEY, PrepareOptions(provider=provider, **options))


def fresh(make_manager: MakeManager, chosen: Settings = SETTINGS, **route: Any) -> Any:
    """The body a server that remembers no body answers now (another connection)."""
    return prepare(make_manager(chosen), **route).body


def text(body: Any) -> str:
    return json.dumps(body)


@pytest.fixture
def manager(make_manager: MakeManager) -> ChatHistoryManager:
    made = make_manager(SETTINGS)
    history.append(made, KEY, history_rows())
    return made


def rows_of(manager: ChatHistoryManager) -> list[Any]:
    return list(history.get(manager, KEY).messages)


def test_a_prepare_with_nothing_changed_reuses_the_body(manager: ChatHistoryManager) -> None:
    bodies = manager.kept(BodyMemo)
    first = prepare(manager)
    hits = bodies.hits
    second = prepare(manager)
    assert second.body is first.body  # not rendered again
    assert bodies.hits == hits + 1
    assert second.cache_key == first.cache_key


def _compaction(m: ChatHistoryManager) -> object:
    items = compaction_items(Registry(), "sonnet", "c", 5_000)
    origin = alias_origin("sonnet", m.settings.providers, "origin")
    return provider_state.save_compaction(m, KEY, rows_of(m)[5].id, items, origin)


REFUSED = {"error": {"message": "messages.1.content.0: Invalid `signature` in `thinking` block"}}

CHANGES: dict[str, Callable[[ChatHistoryManager], object]] = {
    "append": lambda m: history.append(m, KEY, [Message(role="user", content="one more")]),
    "edit": lambda m: edits.edit_message(
        m, KEY, rows_of(m)[-4].id, MessageEdit(content="question 5 (edited)")
    ),
    # the same length: the totals do not change, the text does
    "redact": lambda m: edits.edit_message(
        m, KEY, rows_of(m)[-2].id, MessageEdit(content="[redacted]".ljust(len("output 5 ") + 200))
    ),
    "deleteTurns": lambda m: edits.delete_turns(m, KEY, [6]),
    "truncate": lambda m: edits.truncate(m, KEY, rows_of(m)[-2].id),
    "newBranch": lambda m: history.append(
        m, KEY, [Message(role="user", content="another way")], Follow(parent_id=rows_of(m)[-5].id)
    ),
    "switchBranch": lambda m: (
        history.append(
            m, KEY, [Message(role="user", content="other")], Follow(parent_id=rows_of(m)[-5].id)
        ),
        branches.switch(m, KEY, rows_of(m)[-5].id + 1),
    ),
    "saveSummary": lambda m: history.save_summary(m, KEY, "so far", rows_of(m)[7].id),
    "saveCompaction": _compaction,
    "reportProviderError": lambda m: provider_state.report_error(
        m, KEY, "sonnet", None, 400, REFUSED
    ),
    "import": lambda m: import_writes.import_conversation(
        m, KEY, [*rows_of(m), Message(role="user", content="imported")]
    ),
    "clear": lambda m: history.clear(m, KEY),
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("by", ["this process", "another process"])
def test_every_change_of_the_rows_makes_the_next_prepare_render_anew(
    manager: ChatHistoryManager, make_manager: MakeManager, change: str, by: str
) -> None:
    before = prepare(manager).body
    CHANGES[change](manager if by == "this process" else make_manager(SETTINGS))
    after = prepare(manager).body
    assert text(after) == text(fresh(make_manager))
    assert text(after) != text(before)


def test_retention_makes_the_next_prepare_render_anew(
    manager: ChatHistoryManager, make_manager: MakeManager
) -> None:
    before = prepare(manager).body
    smaller = oracle_settings(maxMessages=10, maxAgeHours=0, context={"promptCache": "auto"})
    after = prepare(manager.under(smaller)).body
    assert text(after) == text(fresh(make_manager, smaller)) != text(before)


ROUTES: list[dict[str, Any]] = [
    {"provider": "sonnet"},
    {"provider": "gw-sonnet"},  # another endpoint: the thinking is not sent
    {"provider": "claude-import"},  # another scope
    {"provider": "opus"},  # another model family
    {"provider": "anthropic"},
    {"provider": "anthropic", "model": "claude-opus-4-1-20250805"},
    {"provider": "bedrock", "model": "anthropic.claude-3-7-sonnet-20250219-v1:0"},
    {"provider": "openai"},
    {"provider": "gemini"},
]


def test_each_route_gets_its_own_body_from_the_same_rows(
    manager: ChatHistoryManager, make_manager: MakeManager
) -> None:
    seen: dict[str, str] = {}
    for _ in range(2):  # the second round answers from the memo
        for route in ROUTES:
            got = text(prepare(manager, **route).body)
            assert got == text(fresh(make_manager, **route)), route
            seen[json.dumps(route)] = got
    # The thinking goes to its origin's endpoint, scope and family only: the same rows render
    # differently for each (a key without the target would answer one for the other).
    signed = seen[json.dumps(ROUTES[0])]
    assert "signature" in signed
    assert all(seen[json.dumps(route)] != signed for route in ROUTES[1:])
    assert manager.kept(BodyMemo).hits >= len(ROUTES) - 2


@pytest.mark.parametrize(
    "context",
    [{"promptCache": "off"}, {"maxContextTokens": 700}, {"keepToolContextTurns": 0}],
)
def test_settings_that_change_the_body_make_the_next_prepare_render_anew(
    manager: ChatHistoryManager, make_manager: MakeManager, context: dict[str, Any]
) -> None:
    before = prepare(manager).body
    chosen = settings(**context)
    after = prepare(manager.under(chosen)).body
    assert text(after) == text(fresh(make_manager, chosen)) != text(before)
    assert text(prepare(manager).body) == text(before)  # and back


def test_the_bodies_are_let_go_at_rest(
    manager: ChatHistoryManager, make_manager: MakeManager
) -> None:
    bodies = manager.kept(BodyMemo)
    first = prepare(manager)
    assert len(bodies) > 0
    manager.rest()
    assert len(bodies) == 0 and bodies.bytes == 0
    again = prepare(manager)
    assert again.body is not first.body and text(again.body) == text(first.body)


def test_the_memo_is_bounded_in_bodies_and_bytes() -> None:
    rows = [Message(role="user", content=f"row {n} " + "x" * 1_000) for n in range(4)]
    memo = BodyMemo(max_entries=2, max_bytes=40_000)
    for n in range(5):
        memo.body(rows, n, lambda: {"n": 1})
    assert len(memo) == 2 and 0 < memo.bytes <= 40_000
    large = [Message(role="user", content="y" * 50_000)]
    made: list[int] = []
    for _ in range(2):  # too large to keep: rendered each time
        memo.body(large, "large", lambda: {"n": made.append(1) or 1})
    assert len(made) == 2 and memo.bytes <= 40_000


def test_a_row_the_request_made_is_matched_by_value() -> None:
    memo = BodyMemo()
    note = "[earlier turns omitted to fit the context window]"
    made: list[int] = []

    def render() -> dict[str, Any]:
        made.append(1)
        return {}

    memo.body([Message(role="user", content=note)], None, render)
    memo.body([Message(role="user", content=note)], None, render)  # a new, equal note
    memo.body([Message(role="user", content=note + "!")], None, render)
    assert len(made) == 2
    # equal as Python values, not as JSON: never one for the other
    for value in (1, True, 1.0):
        call = ToolCall(id="c", name="read", arguments={"n": value})
        memo.body([Message(role="assistant", content=note, tool_calls=(call,))], None, render)
    assert len(made) == 5
