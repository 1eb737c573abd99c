"""Hypothesis properties of request-time preparation: whatever the history and the settings, the
request pairs every call with its result, keeps leading system rows and the running turn, holds
at most one breadcrumb, never makes collapse put two assistant rows in a row, and fits the
budget unless only the newest turn is left."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_history.errors import ContextOverflow
from chat_history.model import Attachment, Message, ToolCall, ToolSpec
from chat_history.policy.budget import Route, effective_budget
from chat_history.policy.prepare.collapse import (
    COLLAPSED_EXCHANGE,
    collapse_turn,
    has_tool_exchange,
)
from chat_history.policy.prepare.context import BREADCRUMB, prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions
from chat_history.policy.sweep import sweep_orphans
from chat_history.policy.tokens import row_tokens, tool_schema_tokens
from chat_history.policy.turns import (
    TOOL_RESULTS_PREFIX,
    carrier_calls,
    is_in_turn_user,
    is_real_user,
    segment,
)
from chat_history.settings import ContextSettings, default_settings

TOOL_NAMES = ("read_file", "grep", "quoted_api")
SUMMARY_PREFIX = COLLAPSED_EXCHANGE.split("{n}")[0]
IMAGE = Attachment(mime_type="image/png", data="iVBORw0KGgo=")

texts = st.text(alphabet="abc xyz 中文\n", max_size=300)


@st.composite
def native_exchange(draw: st.DrawFn, ids: list[int]) -> list[Message]:
    """A carrier with 1-3 calls and the results of some of them (all, unless interrupted)."""
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        ids[0] += 1
        calls.append(ToolCall(id=f"c{ids[0]}", name=draw(st.sampled_from(TOOL_NAMES))))
    rows: list[Message] = [
        Message(
            role="assistant",
            content=draw(st.sampled_from(["", "let me look"])),
            tool_calls=tuple(calls),
        )
    ]
    answered = draw(st.lists(st.booleans(), min_size=len(calls), max_size=len(calls)))
    for call, done in zip(calls, answered, strict=True):
        if done or not draw(st.booleans()):
            rows.append(
                Message(
                    role="tool",
                    content=draw(texts),
                    tool_call_id=call.id,
                    name=call.name,
                    attachments=(IMAGE,) if draw(st.booleans()) else (),
                )
            )
    return rows


@st.composite
def prompt_exchange(draw: st.DrawFn) -> list[Message]:
    """A prompt-mode carrier (JSON or <tool_call> block) and, usually, its ``[Tool results]``."""
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2))
    if draw(st.booleans()):
        content = json.dumps({"tool_calls": [{"name": n, "arguments": {}} for n in names]})
    else:
        content = "".join(f'<tool_call>{{"name": "{n}"}}</tool_call>' for n in names)
    rows = [Message(role="assistant", content=content)]
    if draw(st.booleans()):
        rows.append(Message(role="user", content=TOOL_RESULTS_PREFIX + " " + draw(texts)))
    return rows


@st.composite
def turn_body(draw: st.DrawFn, ids: list[int]) -> list[Message]:
    rows: list[Message] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["native", "prompt", "reply", "system", "parse_error", "sop"]))
        if kind == "native":
            rows += draw(native_exchange(ids))
        elif kind == "prompt":
            rows += draw(prompt_exchange())
        elif kind == "reply":
            rows.append(Message(role="assistant", content=draw(texts)))
        elif kind == "system":
            rows.append(Message(role="system", content=draw(texts)))
        elif kind == "parse_error":
            rows.append(Message(role="user", content="[Tool call parse error] " + draw(texts)))
        else:
            rows.append(Message(role="user", content="[SOP: step] " + draw(texts)))
    return rows


@st.composite
def prompt_row(draw: st.DrawFn) -> Message:
    text = draw(texts)
    if draw(st.integers(0, 5)) == 0:
        text += " [IMAGE:/tmp/shot.png]"
    attachments = (IMAGE,) if draw(st.integers(0, 5)) == 0 else ()
    return Message(role="user", content="Q " + text, attachments=attachments)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    ids = [0]
    rows = [Message(role="system", content=draw(texts)) for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):  # turn 0: rows before the first real user message
        rows.append(Message(role="assistant", content="welcome"))
        rows += draw(turn_body(ids))
    for _ in range(draw(st.integers(0, 7))):
        rows.append(draw(prompt_row()))
        rows += draw(turn_body(ids))
    return rows


@st.composite
def context_settings(draw: st.DrawFn) -> ContextSettings:
    return attrs.evolve(
        default_settings().context,
        max_context_tokens=draw(st.one_of(st.none(), st.just(0), st.integers(1, 3_000))),
        compact_ratio=draw(st.one_of(st.none(), st.floats(-0.5, 1.5))),
        history_pruning_enabled=draw(st.booleans()),
        history_pruning_max_tokens=draw(st.integers(0, 3_000)),
        max_history_turns=draw(st.integers(0, 8)),
        keep_tool_context_turns=draw(st.one_of(st.none(), st.integers(0, 4))),
        trim_low_water=draw(st.floats(0.05, 1.0)),
        preset=draw(st.sampled_from(["default", "localModel", "unbounded"])),
    )


requests = st.fixed_dictionaries(
    {
        "summary": st.one_of(st.none(), texts),
        "tools": st.one_of(
            st.none(),
            st.lists(st.sampled_from(TOOL_NAMES[:2]), unique=True).map(
                lambda names: [ToolSpec(name=n, description="d") for n in names]
            ),
        ),
        "extra_tokens": st.integers(0, 500),
        "overflow_recovery": st.booleans(),
        "keep_tool_context_turns": st.one_of(st.none(), st.integers(0, 4)),
    }
)
routes = st.builds(
    Route,
    st.just("alias"),
    st.just("openai"),
    st.none(),
    st.one_of(st.none(), st.integers(1, 8_000)),
)


def prepare(
    rows: Sequence[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> Prepared | None:
    """The prepared request, or None after checking that a refusal was a real overflow."""
    try:
        return prepare_rows(rows, RequestOptions(settings=ctx, route=route, **kw))
    except ContextOverflow as overflow:
        assert route.context_window is not None
        assert overflow.estimated_tokens > route.context_window
        # The same request with the same budget and no known window is sent at that estimate.
        same_budget = attrs.evolve(
            ctx,
            max_context_tokens=effective_budget(ctx, route),
            compact_ratio=None,
            history_pruning_enabled=False,
        )
        unknown = attrs.evolve(route, context_window=None)
        sent = prepare_rows(rows, RequestOptions(settings=same_budget, route=unknown, **kw))
        assert sent.estimated_tokens == overflow.estimated_tokens
        return None


def is_crumb(row: Message) -> bool:
    return row.role == "user" and row.content.startswith(BREADCRUMB)


def is_summary_row(row: Message) -> bool:
    return row.role == "assistant" and row.content.startswith(SUMMARY_PREFIX)


def running_turn(rows: Sequence[Message]) -> tuple[Message, ...]:
    turns = segment(rows).turns
    return turns[-1].rows if turns else ()


def assert_calls_paired(rows: Sequence[Message]) -> None:
    pending: set[str] = set()
    for row in rows:
        if (row.role == "assistant" and row.tool_calls) or is_real_user(row):
            assert not pending, f"unanswered calls {pending}"
        if row.role == "assistant" and row.tool_calls:
            pending = {call.id for call in row.tool_calls}
        elif row.role == "tool":
            assert row.tool_call_id in pending, f"orphan result {row.tool_call_id}"
            pending.discard(row.tool_call_id)
    assert not pending, f"unanswered calls {pending}"


def assert_prompt_mode_results_follow_a_carrier(rows: Sequence[Message], tools: Any) -> None:
    names = None if tools is None else [t.name for t in tools]
    for turn in segment(rows).turns:
        seen_carrier = False
        for row in turn.rows:
            seen_carrier = seen_carrier or bool(carrier_calls(row, names))
            if row.role == "user" and row.content.startswith(TOOL_RESULTS_PREFIX):
                assert seen_carrier or names is not None


COMMON = settings(deadline=None, max_examples=150)


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_every_call_keeps_its_result_and_every_result_its_call(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is not None:
        assert_calls_paired(out.rows)
        assert_prompt_mode_results_follow_a_carrier(out.rows, kw["tools"])


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_system_rows_and_the_running_turn_are_kept(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    leading = segment(rows).leading_system
    assert all(a is b for a, b in zip(out.rows, leading, strict=False))
    assert len(out.rows) >= len(leading)
    # Every system row is sent, whether its turn was kept, collapsed or dropped.
    assert sorted(id(r) for r in out.rows if r.role == "system") == sorted(
        id(r) for r in rows if r.role == "system"
    )
    running = sweep_orphans(running_turn(rows))
    assert list(out.rows[len(out.rows) - len(running) :]) == running


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_at_most_one_breadcrumb_exactly_when_turns_were_dropped(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    crumbs = [i for i, row in enumerate(out.rows) if is_crumb(row)]
    assert len(crumbs) == (1 if out.trimmed is not None else 0)
    if crumbs:
        # Right after the system block, before the first retained turn.
        assert all(row.role == "system" for row in out.rows[: crumbs[0]])
        assert out.rows[crumbs[0] + 1].role != "system"
    assert len(out.events) == len({e.reason for e in out.events})
    if out.trimmed is not None:
        assert out.trimmed.reason == out.events[-1].reason
        assert out.trimmed.dropped_turns == sum(e.dropped_turns for e in out.events)
        assert out.trimmed.dropped_messages == sum(e.dropped_messages for e in out.events)


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_collapse_never_puts_two_assistant_rows_in_a_row(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    for index, row in enumerate(out.rows):
        if is_summary_row(row):
            before = [r for r in out.rows[:index] if r.role != "system"]
            assert not before or before[-1].role == "user"


@COMMON
@given(histories(), st.one_of(st.none(), st.just(["read_file"])))
def test_a_collapsed_turn_is_its_prompt_and_one_assistant_row(
    rows: list[Message], tools: list[str] | None
) -> None:
    for turn in segment(rows).turns:
        sent, removed = collapse_turn(turn.rows, tools)
        if not has_tool_exchange(turn.rows, tools):
            assert (sent, removed) == (turn.rows, 0)
            continue
        spoken = [r for r in sent if r.role != "system"]
        assert len(spoken) <= 2
        assert [r.role for r in spoken[-1:]] == ["assistant"] or spoken == [turn.rows[0]]
        assert not any(
            r.role == "tool" or is_in_turn_user(r) or carrier_calls(r, tools) for r in sent
        )
        assert removed == len(turn.rows) - sum(1 for r in sent if any(r is x for x in turn.rows))


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_the_request_fits_the_budget_unless_only_the_newest_turn_is_left(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    budget = effective_budget(ctx, route)
    assert out.budget == (budget or None)
    if budget and out.estimated_tokens > budget:
        spoken = [r for r in out.rows if r.role != "system" and not is_crumb(r)]
        newest = [r for r in sweep_orphans(running_turn(rows)) if r.role != "system"]
        assert spoken == newest


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_the_estimate_is_what_is_sent(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    running_tools = {id(r) for r in running_turn(rows) if r.role == "tool"}
    fixed = kw["extra_tokens"] + sum(tool_schema_tokens(t) for t in kw["tools"] or ())
    assert out.estimated_tokens == fixed + sum(
        row_tokens(r, dispatch_tool_images=id(r) in running_tools) for r in out.rows
    )
    if out.context_window is not None:
        assert out.estimated_tokens <= out.context_window
    if out.trimmed is not None:
        assert out.trimmed.tokens_after == out.estimated_tokens


@COMMON
@given(histories(), context_settings(), routes, requests)
def test_every_stored_row_is_sent_collapsed_or_dropped(
    rows: list[Message], ctx: ContextSettings, route: Route, kw: dict[str, Any]
) -> None:
    if sweep_orphans(rows) != rows:
        return  # the sweep repairs inconsistent histories on top of the counts
    out = prepare(rows, ctx, route, kw)
    if out is None:
        return
    sent = [r for r in out.rows if r.role != "system" and not is_crumb(r) and not is_summary_row(r)]
    dropped = out.trimmed.dropped_messages if out.trimmed is not None else 0
    assert len(sent) + out.collapsed_tool_rows + dropped == sum(
        1 for r in rows if r.role != "system"
    )
    # Order is kept: what is sent is a subsequence of the history.
    positions = {id(r): i for i, r in enumerate(rows)}
    indices = [positions[id(r)] for r in sent]
    assert indices == sorted(indices)
    if out.trimmed is None and out.collapsed_turns == 0:
        assert list(out.rows) == rows
