"""A prepare that reuses a body it rendered before (``service.body_memo``) answers byte for byte
what a prepare that renders everything answers, after any interleaving of the operations that
change what a body is made of, on both engines: appends (replies minted at any alias, tool
exchanges), edits and redactions, deleted turns, truncates, new branches and switches, summaries,
native compactions, reported refusals, retention, imports; and the route (kind, alias, model) and
the settings (prompt cache, budget) of each request. Half the writes come from another
connection (another process's writes, seen through the change watch). The reference is a
manager on its own connection whose bodies are dropped before each of its prepares."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_oracle import ALIASES, Registry, compaction_items, reply
from state_oracle import settings as oracle_settings

from chat_history.errors import ChatHistoryError
from chat_history.model import Follow, Key, Message, ToolCall
from chat_history.policy.origins import alias_origin
from chat_history.service import branches, edits, history, import_writes, provider_state
from chat_history.service.body_memo import BodyMemo
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PreparedRequest, PrepareOptions
from chat_history.settings import PROVIDER_KINDS, Settings

pytestmark = pytest.mark.engines

ROUTES: tuple[tuple[str, str | None], ...] = (
    *((alias, None) for alias in ALIASES),
    *((kind, None) for kind in PROVIDER_KINDS),
    ("anthropic", "claude-opus-4-1-20250805"),
    ("bedrock", "anthropic.claude-3-7-sonnet-20250219-v1:0"),
    ("gemini", "gemini-3-pro-preview"),
)
REFUSED = {
    "anthropic": {
        "error": {"message": "messages.1.content.0: Invalid `signature` in `thinking` block"}
    },
    "openai-responses": {"error": {"code": "invalid_encrypted_content"}},
    "gemini": {"error": {"message": "Corrupted thought signature."}},
}
_keys = itertools.count()


def settings_of(prompt_cache: str, budget: int, max_messages: int) -> Settings:
    return oracle_settings(
        maxMessages=max_messages,
        maxTokens=0,
        maxAgeHours=0,
        context={"maxContextTokens": budget, "promptCache": prompt_cache},
    )


def answer(manager: ChatHistoryManager, key: Key, route: tuple[str, str | None]) -> Any:
    """What a prepare answers, as the bytes a client gets (or the error it raises)."""
    try:
        prepared = history.prepare(manager, key, PrepareOptions(provider=route[0], model=route[1]))
    except ChatHistoryError as exc:
        return type(exc).__name__
    return _bytes(prepared)


def _bytes(prepared: PreparedRequest) -> str:
    proposal = prepared.compaction
    return json.dumps(
        [
            prepared.body,
            prepared.cache_key,
            prepared.estimated_tokens,
            None if proposal is None else [proposal.request.body, proposal.through_id],
        ]
    )


class Run:
    """One example: a conversation, the cached manager, the other connection and the route."""

    def __init__(self, cached: ChatHistoryManager, other: ChatHistoryManager) -> None:
        self.key = Key("ws", f"memo-{next(_keys)}")
        self.cached = cached
        self.other = other
        self.reference = other
        self.registry = Registry()
        self.route: tuple[str, str | None] = ("sonnet", None)
        self.at = 1_000
        self.calls = itertools.count()

    def writer(self, data: st.DataObject) -> ChatHistoryManager:
        return self.cached if data.draw(st.booleans(), "by this process") else self.other

    def ids(self) -> list[int]:
        return [row.id for row in branches.tree_rows(self.cached, self.key)]

    def path(self) -> list[Any]:
        return list(history.get(self.cached, self.key).messages)


def _append(run: Run, data: st.DataObject) -> None:
    who = run.writer(data)
    run.at += 1
    kind = data.draw(st.sampled_from(["user", "reply", "exchange", "system"]), "append")
    if kind == "user":
        text = data.draw(st.sampled_from(["question", "x" * 600, "why?", "[IMAGE:nothing]"]))
        history.append(who, run.key, [Message(role="user", content=f"{text} {run.at}")])
    elif kind == "system":
        history.append(who, run.key, [Message(role="system", content=f"rule {run.at}")])
    elif kind == "reply":
        target = data.draw(st.sampled_from(sorted(ALIASES)), "minted at")
        row = reply(run.registry, target, f"r{run.at}", "answer " * 40, at=run.at)
        history.append(who, run.key, [row])
    else:
        target = data.draw(st.sampled_from(sorted(ALIASES)), "minted at")
        call = ToolCall(id=f"call_{next(run.calls)}", name="read", arguments={"p": run.at})
        row = reply(run.registry, target, f"r{run.at}", "reading", calls=[call], at=run.at)
        result = Message(role="tool", content="output " * 80, tool_call_id=call.id, name="read")
        history.append(who, run.key, [row, result])


def _edit(run: Run, data: st.DataObject) -> None:
    rows = run.path()
    if not rows:
        return
    row = data.draw(st.sampled_from(rows), "edited")
    text = data.draw(st.sampled_from(["[redacted]", row.content + " (edited)", "short"]))
    edits.edit_message(run.writer(data), run.key, row.id, MessageEdit(content=text))


def _delete_turn(run: Run, data: st.DataObject) -> None:
    turns = sorted({row.turn for row in run.path() if row.turn > 0})
    if turns:
        turn = data.draw(st.sampled_from(turns), "deleted turn")
        edits.delete_turns(run.writer(data), run.key, [turn])


def _truncate(run: Run, data: st.DataObject) -> None:
    rows = run.path()
    if len(rows) > 2:
        row = data.draw(st.sampled_from(rows[2:]), "truncated from")
        edits.truncate(run.writer(data), run.key, row.id)


def _branch(run: Run, data: st.DataObject) -> None:
    ids = run.ids()
    if not ids:
        return
    parent = data.draw(st.sampled_from(ids), "parent")
    run.at += 1
    row = Message(role="user", content=f"another way {run.at}")
    history.append(run.writer(data), run.key, [row], Follow(parent_id=parent))


def _switch(run: Run, data: st.DataObject) -> None:
    ids = run.ids()
    if ids:
        branches.switch(run.writer(data), run.key, data.draw(st.sampled_from(ids), "switched to"))


def _summary(run: Run, data: st.DataObject) -> None:
    rows = run.path()
    who = run.writer(data)
    if not rows or data.draw(st.booleans(), "delete the summary"):
        history.delete_summary(who, run.key)
        return
    row = data.draw(st.sampled_from(rows), "covered through")
    history.save_summary(who, run.key, f"so far {run.at}", row.id)


def _compaction(run: Run, data: st.DataObject) -> None:
    rows = run.path()
    if not rows:
        return
    target = data.draw(st.sampled_from(["gpt", "gpt-org2", "sonnet", "opus"]), "compacted at")
    row = data.draw(st.sampled_from(rows), "compacted through")
    run.at += 1
    items = compaction_items(run.registry, target, f"c{run.at}", run.at)
    origin = alias_origin(target, run.cached.settings.providers, "origin")
    provider_state.save_compaction(run.writer(data), run.key, row.id, items, origin)


def _refusal(run: Run, data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(sorted(ALIASES)), "refused at")
    body = REFUSED.get(str(ALIASES[target]["provider"]))
    if body is not None:
        provider_state.report_error(run.writer(data), run.key, target, None, 400, body)


def _import(run: Run, data: st.DataObject) -> None:
    rows = [Message(role=row.role, content=row.content) for row in run.path()]
    rows.append(Message(role="user", content=f"imported {run.at}"))
    import_writes.import_conversation(run.writer(data), run.key, rows)


def _route(run: Run, data: st.DataObject) -> None:
    kind = str(ALIASES.get(run.route[0], {}).get("provider", run.route[0]))
    siblings = [(a, None) for a in sorted(ALIASES) if ALIASES[a]["provider"] == kind]
    # Often a target of the same kind: the same rows, the state fenced otherwise.
    choices = siblings if siblings and data.draw(st.booleans(), "same kind") else ROUTES
    run.route = data.draw(st.sampled_from(choices), "route")


def _settings(run: Run, data: st.DataObject) -> None:
    chosen = settings_of(
        data.draw(st.sampled_from(["auto", "off"]), "promptCache"),
        data.draw(st.sampled_from([1_500, 4_000, 100_000]), "budget"),
        data.draw(st.sampled_from([1_000, 12]), "maxMessages"),
    )
    run.cached = run.cached.under(chosen)
    run.other = run.other.under(chosen)
    run.reference = run.other


def _nothing(run: Run, data: st.DataObject) -> None:
    """A prepare again with nothing changed: what the memo is for."""


STEPS: dict[str, Callable[[Run, st.DataObject], None]] = {
    "append": _append,
    "edit": _edit,
    "deleteTurns": _delete_turn,
    "truncate": _truncate,
    "branch": _branch,
    "switchBranch": _switch,
    "summary": _summary,
    "compaction": _compaction,
    "refusal": _refusal,
    "import": _import,
    "route": _route,
    "settings": _settings,
    "nothing": _nothing,
}
#: Appends and route changes more often than the rest: long enough histories, replies minted
#: at many targets, prepared for many.
WEIGHTED = sorted(STEPS) + ["append"] * 6 + ["route"] * 3


def test_a_reused_body_is_the_body_a_fresh_rendering_makes(
    make_manager: Callable[..., ChatHistoryManager],
) -> None:
    start = settings_of("auto", 4_000, 1_000)
    cached = make_manager(start)
    other = make_manager(start)  # another connection to the same database
    bodies = cached.kept(BodyMemo)

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        example = Run(cached, other)
        for _ in range(data.draw(st.integers(6, 24), "steps")):
            name = data.draw(st.sampled_from(WEIGHTED), "step")
            with contextlib.suppress(ChatHistoryError):  # a refused step changes nothing
                STEPS[name](example, data)
            got = answer(example.cached, example.key, example.route)
            example.reference.kept(BodyMemo).at_rest()
            assert got == answer(example.reference, example.key, example.route), name

    run()
    assert bodies.hits > 0  # the memo was used: the equality above is not of two renderings
