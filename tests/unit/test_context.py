"""Request-time preparation (semantics.md, "Request-time preparation" steps 3-9): the scenarios
of the issue, then one test per rule."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from rows import A, S, T, U

from chat_history.errors import ContextOverflow, InvalidParams
from chat_history.model import Attachment, Message, StoredMessage, ToolSpec
from chat_history.policy.budget import Route
from chat_history.policy.prepare.collapse import COLLAPSED_EXCHANGE, collapse_turn
from chat_history.policy.prepare.compaction import context_note
from chat_history.policy.prepare.context import BREADCRUMB, prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions, RequestTrim
from chat_history.policy.tokens import row_tokens, tool_schema_tokens
from chat_history.settings import ContextSettings, default_settings

BIG = "x" * 2_000  # 504 tokens as a row
UNKNOWN = Route("openai", "openai", None, None)


def ctx(**changes: Any) -> ContextSettings:
    return attrs.evolve(default_settings().context, **changes)


def prompt_call(*names: str) -> Message:
    payload = {"tool_calls": [{"name": n, "arguments": {}} for n in names]}
    return Message(role="assistant", content=json.dumps(payload))


def run(
    rows: Sequence[Message],
    route: Route = UNKNOWN,
    *,
    settings: ContextSettings | None = None,
    **kw: Any,
) -> Prepared:
    return prepare_rows(rows, RequestOptions(settings=settings or ctx(), route=route, **kw))


def crumbs(rows: Sequence[Message]) -> int:
    return sum(1 for r in rows if r.content.startswith(BREADCRUMB))


def summary_text(n: int) -> str:
    return COLLAPSED_EXCHANGE.format(n=n)


# --- scenarios ---------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [0, None, 100_000])
def test_s1_budget_off_or_ample_leaves_rows_unchanged(max_tokens: int | None) -> None:
    rows = [S(), U(BIG), A(), U("two"), A("b", "c1"), T("c1"), A("done")]
    out = run(rows, settings=ctx(max_context_tokens=max_tokens))
    assert out.rows == tuple(rows)
    assert all(a is b for a, b in zip(out.rows, rows, strict=True))
    assert out.trimmed is None
    assert out.events == ()
    assert out.budget == (None if max_tokens == 0 else max_tokens or 32_000)


def test_s2_budget_drops_the_oldest_whole_turns_behind_one_breadcrumb() -> None:
    s, u3, a3 = S(), U("three"), A("three")
    rows = [s, U(BIG), A("one"), U(BIG), A("two"), u3, a3]
    out = run(rows, settings=ctx(max_context_tokens=200))
    assert out.rows == (s, breadcrumb_row(), u3, a3)
    assert out.trimmed is not None
    assert out.trimmed.dropped_turns == 2
    assert out.trimmed.dropped_messages == 4
    assert out.trimmed.retained_turns == 1
    assert out.trimmed.reason == "tokenBudget"
    assert out.estimated_tokens <= 200
    assert out.budget == 200


def test_s3_one_turn_over_budget_is_kept_whole() -> None:
    rows = [S(), U(BIG), A("a", "c1"), T("c1", BIG), A(BIG)]
    out = run(rows, settings=ctx(max_context_tokens=200))
    assert out.rows == tuple(rows)
    assert out.trimmed is None
    assert out.estimated_tokens > 200


def test_s3_one_turn_over_a_known_small_window_is_context_overflow() -> None:
    rows = [S(), U(BIG), A(BIG)]
    with pytest.raises(ContextOverflow) as raised:
        run(rows, Route("tiny", "ollama", "m", 600), settings=ctx(max_context_tokens=200))
    assert raised.value.context_window == 600
    assert raised.value.estimated_tokens == sum(row_tokens(r) for r in rows)


def test_s4_a_dropped_turn_takes_its_native_and_prompt_mode_tool_rows_along() -> None:
    s, u2, a2 = S(), U("two"), A("two")
    rows = [
        s,
        U(BIG),
        A("", "c1"),
        T("c1"),
        U("[Tool results] read_file: ok"),
        A("one"),
        u2,
        a2,
    ]
    out = run(rows, settings=ctx(max_context_tokens=150))
    assert out.rows == (s, breadcrumb_row(), u2, a2)
    assert not any(r.role == "tool" or r.content.startswith("[Tool results]") for r in out.rows)
    assert out.trimmed is not None
    assert (out.trimmed.dropped_turns, out.trimmed.dropped_messages) == (1, 5)


def test_s5_turn_limit_0_keeps_the_newest_turn_only() -> None:
    u2, a2 = U("two"), A("two")
    out = run([U("one"), A("one"), u2, a2], settings=ctx(max_history_turns=0))
    assert out.rows == (breadcrumb_row(), u2, a2)
    assert out.trimmed is not None
    assert out.trimmed.reason == "turnLimit"
    assert [e.reason for e in out.events] == ["turnLimit"]
    assert out.events[0].budget is None


def test_s5_turn_limit_1_keeps_a_late_system_row() -> None:
    s0, late, u2, a2 = S("lead"), S("late rule"), U("two"), A("two")
    out = run([s0, U("one"), A("one"), late, u2, a2], settings=ctx(max_history_turns=1))
    assert out.rows == (s0, late, breadcrumb_row(), u2, a2)
    assert out.trimmed is not None
    assert out.trimmed.dropped_messages == 2  # the moved system row is not dropped


def native_turn(n: int) -> list[Message]:
    return [U(f"q{n}"), A("", f"c{n}"), T(f"c{n}", f"result {n}"), A(f"answer {n}")]


def test_s6_collapse_keeps_prompt_and_closing_reply_of_old_turns() -> None:
    s = S()
    turns = [native_turn(n) for n in range(1, 5)]
    rows = [s, *[r for t in turns for r in t]]
    out = run(rows, keep_tool_context_turns=1)
    assert out.rows == (
        s,
        turns[0][0],
        turns[0][3],
        turns[1][0],
        turns[1][3],
        *turns[2],
        *turns[3],
    )
    assert out.collapsed_tool_rows == 4
    assert out.collapsed_turns == 2
    assert out.trimmed is None
    assert out.events == ()
    assert not any(
        a.role == b.role == "assistant" for a, b in zip(out.rows, out.rows[1:], strict=False)
    )


def test_s7_an_aborted_turn_is_summarised_with_all_its_calls() -> None:
    u1 = U("one")
    aborted = [u1, A("", "c1"), T("c1"), A("", "c2", "c3")]
    u2, a2 = U("two"), A("two")
    out = run([*aborted, u2, a2], keep_tool_context_turns=0)
    assert out.rows == (u1, Message(role="assistant", content=summary_text(3)), u2, a2)
    assert out.rows[1].content == "[Tool exchange: 3 tool call(s) — results collapsed]"
    assert out.collapsed_tool_rows == 3
    assert out.collapsed_turns == 1


def test_s9_an_image_marker_costs_1604() -> None:
    out = run([U("[IMAGE:/tmp/a.png]")])
    assert out.estimated_tokens == 1_604


def test_s9_the_same_image_as_a_600kb_data_uri_costs_1604() -> None:
    data = base64.b64encode(b"\x89PNG" + b"\0" * 450_000).decode()
    assert len(data) >= 600_000
    out = run([U(f"[IMAGE:data:image/png;base64,{data}]")])
    assert out.estimated_tokens == 1_604


def test_s10_overflow_recovery_drops_to_two_thirds_once() -> None:
    rows = [r for n in range(6) for r in (U(f"{n}" + "y" * 4_000), A("z" * 4_000))]
    before = run(rows).estimated_tokens
    out = run(rows, overflow_recovery=True)
    assert out.estimated_tokens <= 2 * before // 3
    assert crumbs(out.rows) == 1
    assert len(out.events) == 1
    event = out.events[0]
    assert event.reason == "overflowRecovery"
    assert event.budget == 2 * before // 3
    assert event.tokens_before == before
    assert out.trimmed is not None
    assert out.trimmed.reason == "overflowRecovery"
    assert out.rows[-2:] == tuple(rows[-2:])


# --- step 3: tool context collapse ------------------------------------------------------------


def test_keep_defaults_to_the_preset() -> None:
    rows = [r for n in range(1, 5) for r in native_turn(n)]
    assert run(rows).collapsed_turns == 1  # default preset: 2
    assert run(rows, settings=ctx(preset="localModel")).collapsed_turns == 2
    assert run(rows, settings=ctx(preset="unbounded")).collapsed_turns == 0
    assert run(rows, settings=ctx(keep_tool_context_turns=0)).collapsed_turns == 3


def test_the_request_parameter_overrides_the_setting() -> None:
    rows = [r for n in range(1, 5) for r in native_turn(n)]
    out = run(rows, settings=ctx(keep_tool_context_turns=0), keep_tool_context_turns=3)
    assert out.collapsed_turns == 0


def test_the_running_turn_is_never_collapsed() -> None:
    rows = native_turn(1)
    out = run(rows, keep_tool_context_turns=0)
    assert out.rows == tuple(rows)
    assert out.collapsed_turns == 0


def test_a_text_only_turn_is_sent_as_it_is() -> None:
    rows = [U("one"), A("a"), A("b"), U("two"), A("c")]
    out = run(rows, keep_tool_context_turns=0)
    assert out.rows == tuple(rows)
    assert out.collapsed_turns == 0


def test_a_prompt_mode_exchange_collapses_as_a_unit() -> None:
    u1, reply = U("one"), A("all done")
    rows = [u1, prompt_call("read_file"), U("[Tool results] ok"), reply, U("two"), A("c")]
    out = run(rows, keep_tool_context_turns=0, tools=[ToolSpec(name="read_file")])
    assert out.rows == (u1, reply, *rows[4:])
    assert out.collapsed_tool_rows == 2


def test_a_tool_call_block_carrier_counts() -> None:
    carrier = Message(role="assistant", content='<tool_call>{"name": "grep"}</tool_call>')
    u1 = U("one")
    out = run([u1, carrier, U("two"), A()], keep_tool_context_turns=0)
    assert out.rows[:2] == (u1, Message(role="assistant", content=summary_text(1)))


def test_a_quoted_api_trace_naming_no_known_tool_is_a_plain_reply() -> None:
    trace = prompt_call("some_api_function")
    rows = [U("explain this trace"), trace, U("two"), A()]
    out = run(rows, keep_tool_context_turns=0, tools=[ToolSpec(name="read_file")])
    assert out.rows == tuple(rows)
    assert out.collapsed_turns == 0


def test_with_no_tools_list_any_prompt_mode_name_counts() -> None:
    u1 = U("one")
    rows = [u1, prompt_call("some_api_function"), U("two"), A()]
    out = run(rows, keep_tool_context_turns=0)
    assert out.rows[:2] == (u1, Message(role="assistant", content=summary_text(1)))


def test_an_empty_tools_list_leaves_prompt_mode_text_alone() -> None:
    rows = [U("one"), prompt_call("read_file"), U("two"), A()]
    out = run(rows, keep_tool_context_turns=0, tools=[])
    assert out.rows == tuple(rows)


def test_a_parse_error_or_sop_row_is_a_tool_exchange() -> None:
    for inner in ("[Tool call parse error] bad json", "[SOP: step 2]"):
        u1, reply = U("one"), A("closing")
        out = run([u1, A("trying"), U(inner), reply, U("two"), A()], keep_tool_context_turns=0)
        assert out.rows[:2] == (u1, reply)
        assert out.collapsed_tool_rows == 2


def test_a_turn_ending_on_a_result_gets_a_summary_row() -> None:
    u1 = U("one")
    out = run([u1, A("", "c1", "c2"), T("c1"), T("c2"), U("two"), A()], keep_tool_context_turns=0)
    assert out.rows[:2] == (u1, Message(role="assistant", content=summary_text(2)))


def test_a_turn_ending_on_an_unanswered_sop_prompt_is_not_closed_by_an_earlier_reply() -> None:
    u1 = U("one")
    sent, removed = collapse_turn([u1, A("first step done"), U("[SOP: step 2]")])
    assert sent == (u1, Message(role="assistant", content=summary_text(1)))
    assert removed == 2


def test_without_carriers_the_summary_counts_result_rows() -> None:
    rows = [U("one"), U("[Tool results] a"), U("[Tool results] b")]
    sent, removed = collapse_turn(rows, tools=[])
    assert sent == (rows[0], Message(role="assistant", content=summary_text(2)))
    assert removed == 2


def test_the_summary_says_at_least_one_call() -> None:
    rows = [U("one"), U("[SOP: step 1]")]
    sent, _ = collapse_turn(rows)
    assert sent[1].content == summary_text(1)


def test_system_rows_inside_a_collapsed_turn_stay_in_place() -> None:
    u1, late, reply = U("one"), S("late"), A("closing")
    sent, removed = collapse_turn([u1, A("", "c1"), late, T("c1"), reply])
    assert sent == (u1, late, reply)
    assert removed == 2


def test_a_system_row_after_the_reply_does_not_hide_it() -> None:
    u1, reply, late = U("one"), A("closing"), S("late")
    sent, _ = collapse_turn([u1, A("", "c1"), T("c1"), reply, late])
    assert sent == (u1, reply, late)


def test_only_the_closing_reply_survives_of_several_assistant_rows() -> None:
    u1, reply = U("one"), A("final")
    sent, removed = collapse_turn([u1, A("let me look"), A("", "c1"), T("c1"), reply])
    assert sent == (u1, reply)
    assert removed == 3


def test_a_turn_zero_without_prompt_collapses_to_its_reply() -> None:
    greeting = A("hello")
    sent, removed = collapse_turn([A("", "c1"), T("c1"), greeting])
    assert sent == (greeting,)
    assert removed == 2


def test_collapse_sends_no_notification_and_reports_counts() -> None:
    rows = [r for n in range(1, 4) for r in native_turn(n)]
    out = run(rows, keep_tool_context_turns=0)
    assert (out.collapsed_tool_rows, out.collapsed_turns) == (4, 2)
    assert out.trimmed is None
    assert out.events == ()
    assert crumbs(out.rows) == 0


def test_estimates_are_of_the_collapsed_request() -> None:
    rows = [U("one"), A("", "c1"), T("c1", BIG), A("done"), U("two"), A("ok")]
    out = run(rows, settings=ctx(max_context_tokens=100), keep_tool_context_turns=0)
    assert out.trimmed is None  # the big result is collapsed, so nothing needs dropping
    assert out.estimated_tokens == sum(row_tokens(r) for r in out.rows)


# --- step 4: turn limit ------------------------------------------------------------------------


def test_turn_limit_keeps_the_newest_n_turns() -> None:
    rows = [r for n in range(5) for r in (U(f"q{n}"), A(f"a{n}"))]
    out = run(rows, settings=ctx(max_history_turns=2))
    assert out.rows == (breadcrumb_row(), *rows[-4:])
    assert out.trimmed == RequestTrim(
        dropped_messages=6,
        dropped_turns=3,
        retained_turns=2,
        reason="turnLimit",
        tokens_before=sum(row_tokens(r) for r in rows),
        tokens_after=out.estimated_tokens,
    )


def test_rows_before_the_first_prompt_form_a_turn_the_limit_can_drop() -> None:
    s, u1, a1 = S(), U("one"), A("one")
    out = run([s, A("welcome"), S("late"), u1, a1], settings=ctx(max_history_turns=1))
    assert out.rows == (s, S("late"), breadcrumb_row(), u1, a1)


# --- step 5: token budget ---------------------------------------------------------------------


def test_the_budget_counts_tool_schemas_and_extra_tokens() -> None:
    rows = [U("a" * 400), A("b"), U("c"), A("d")]
    plain = run(rows, settings=ctx(max_context_tokens=150))
    assert plain.trimmed is None
    tool = ToolSpec(name="read_file", description="Read a file", parameters={"type": "object"})
    with_tools = run(rows, settings=ctx(max_context_tokens=150), tools=[tool])
    assert with_tools.estimated_tokens == plain.estimated_tokens + tool_schema_tokens(tool)
    with_extra = run(rows, settings=ctx(max_context_tokens=150), extra_tokens=50)
    assert with_extra.trimmed is not None
    assert with_extra.estimated_tokens == sum(row_tokens(r) for r in with_extra.rows) + 50


def test_the_breadcrumb_counts_toward_the_budget() -> None:
    # Dropping the first turn frees 12 tokens, but the breadcrumb costs 17: the second must go.
    first = [U("x" * 8), A("y" * 8)]
    second = [U("p" * 16), A("q" * 16)]
    last = [U("r"), A("s")]
    rows = [*first, *second, *last]
    total = sum(row_tokens(r) for r in rows)
    crumb = row_tokens(breadcrumb_row())
    assert total - sum(row_tokens(r) for r in first) + crumb > total - 1
    out = run(rows, settings=ctx(max_context_tokens=total - 1))
    assert out.rows == (breadcrumb_row(), *last)
    assert out.estimated_tokens <= total - 1


def test_trim_low_water_trims_a_grid_step_once_the_budget_forces_a_trim() -> None:
    # Version 3's stable prefix: the first sent turn moves to a line of the grid of positions
    # (collapsed estimates of the turns before it) whose step is budget x (1 - trimLowWater),
    # until the settled turns (those below the tool-context line: turns 1-8 of 10 with the
    # default keepToolContextTurns 2) fit budget x trimLowWater.
    rows = [r for n in range(10) for r in (U(f"{n}" + "u" * 99), A("a" * 100))]
    per_turn = row_tokens(rows[0]) + row_tokens(rows[1])
    budget = per_turn * 8
    plain = run(rows, settings=ctx(max_context_tokens=budget))
    low = run(rows, settings=ctx(max_context_tokens=budget, trim_low_water=0.5))
    assert plain.estimated_tokens <= budget
    assert plain.trimmed is not None and plain.trimmed.dropped_turns == 3
    # lines every 4 turns: at 4 turns the settled turns 5-8 and the note pass half the budget
    assert low.trimmed is not None and low.trimmed.dropped_turns == 8
    assert low.rows[1:] == tuple(rows[16:])
    assert low.estimated_tokens <= budget
    assert low.events[0].budget == budget


def test_trim_low_water_does_nothing_under_the_budget() -> None:
    rows = [U("a" * 400), A("b"), U("c"), A("d")]
    out = run(rows, settings=ctx(max_context_tokens=10_000, trim_low_water=0.01))
    assert out.rows == tuple(rows)


def test_history_pruning_budget_trims() -> None:
    rows = [U(BIG), A("one"), U("two"), A("two")]
    settings = ctx(history_pruning_enabled=True, history_pruning_max_tokens=100)
    out = run(rows, settings=settings)
    assert out.budget == 100
    assert out.rows == (breadcrumb_row(), *rows[2:])


# --- step 6: overflow recovery ---------------------------------------------------------------


def test_overflow_recovery_keeps_the_newest_turn() -> None:
    rows = [U(BIG), A(BIG)]
    out = run(rows, overflow_recovery=True)
    assert out.rows == tuple(rows)
    assert out.events == ()


def test_overflow_recovery_runs_when_trimming_is_off() -> None:
    rows = [r for n in range(3) for r in (U(f"{n}{BIG}"), A("a"))]
    out = run(rows, settings=ctx(max_context_tokens=0), overflow_recovery=True)
    assert out.budget is None
    assert out.trimmed is not None
    assert out.trimmed.reason == "overflowRecovery"


# --- steps 4-6 together ------------------------------------------------------------------------


def test_each_dropping_step_sends_one_event_and_the_totals_name_the_last() -> None:
    s = S()
    rows = [s, *[r for n in range(5) for r in (U(f"{n}{BIG}"), A(f"a{n}"))], U("last"), A()]
    out = run(
        rows, settings=ctx(max_history_turns=4, max_context_tokens=1_200), overflow_recovery=True
    )
    assert [e.reason for e in out.events] == ["turnLimit", "tokenBudget", "overflowRecovery"]
    limit, budget, recovery = out.events
    assert (limit.dropped_turns, budget.dropped_turns, recovery.dropped_turns) == (2, 1, 1)
    assert limit.tokens_after == budget.tokens_before
    assert budget.tokens_after == recovery.tokens_before
    assert budget.budget == 1_200
    assert recovery.budget == 2 * recovery.tokens_before // 3
    assert all(e.scope == "request" for e in out.events)
    assert out.trimmed == RequestTrim(
        dropped_messages=8,
        dropped_turns=4,
        retained_turns=2,
        reason="overflowRecovery",
        tokens_before=limit.tokens_before,
        tokens_after=out.estimated_tokens,
    )
    assert crumbs(out.rows) == 1
    assert out.rows[:2] == (s, breadcrumb_row())


def test_tokens_before_is_the_estimate_after_collapse() -> None:
    rows = [*native_turn(1), *native_turn(2), U("three"), A("three")]
    out = run(rows, settings=ctx(max_history_turns=1), keep_tool_context_turns=0)
    collapsed = [rows[0], rows[3], rows[4], rows[7], *rows[8:]]
    assert out.trimmed is not None
    assert out.trimmed.tokens_before == sum(row_tokens(r) for r in collapsed)


def test_dropped_system_rows_move_up_in_order_after_the_leading_ones() -> None:
    lead, s1, s2 = S("lead"), S("s1"), S("s2")
    u3, a3 = U("three"), A("three")
    rows = [lead, U("one"), s1, A("one"), U("two"), A("two"), s2, u3, a3]
    out = run(rows, settings=ctx(max_history_turns=0))
    assert out.rows == (lead, s1, s2, breadcrumb_row(), u3, a3)
    assert out.trimmed is not None
    assert out.trimmed.dropped_messages == 4


# --- step 7: breadcrumb -------------------------------------------------------------------------


def test_the_summary_follows_the_breadcrumb_line() -> None:
    # semantics.md step 7 (changed in version 2): the summary part has its own header line.
    out = run(
        [U("one"), A("one"), U("two"), A("two")],
        settings=ctx(max_history_turns=1),
        summary="The user asked about X.",
    )
    assert out.rows[0] == Message(
        role="user",
        content=BREADCRUMB + "\n\n[Summary of earlier turns]\nThe user asked about X.",
    )
    assert out.estimated_tokens == sum(row_tokens(r) for r in out.rows)


def test_a_summary_is_not_sent_when_nothing_was_dropped() -> None:
    rows = [U("one"), A("one")]
    assert run(rows, summary="old summary").rows == tuple(rows)


def test_a_blank_summary_is_no_summary() -> None:
    assert breadcrumb_row("  \n") == breadcrumb_row()


# --- step 8: orphan sweep ---------------------------------------------------------------------


def test_an_inconsistent_history_is_swept() -> None:
    u1, a1 = U("one"), A("one")
    rows = [u1, T("ghost"), a1, U("two"), A("", "c9")]
    out = run(rows)
    assert out.rows == (u1, a1, rows[3])
    assert out.estimated_tokens == sum(row_tokens(r) for r in out.rows)


# --- step 9: capacity check ------------------------------------------------------------------


def test_the_capacity_check_applies_when_trimming_is_off() -> None:
    rows = [U(BIG), A("a")]
    with pytest.raises(ContextOverflow):
        run(rows, Route("a", "openai", "m", 100), settings=ctx(max_context_tokens=0))


def test_a_request_exactly_at_the_window_is_sent() -> None:
    rows = [U(BIG), A("a")]
    window = sum(row_tokens(r) for r in rows)
    out = run(rows, Route("a", "openai", "m", window), settings=ctx(max_context_tokens=0))
    assert out.estimated_tokens == window
    assert out.context_window == window


def test_tool_schemas_and_extra_tokens_count_toward_the_window() -> None:
    rows = [U("a"), A("b")]
    window = sum(row_tokens(r) for r in rows)
    with pytest.raises(ContextOverflow):
        run(rows, Route("a", "openai", "m", window), extra_tokens=1)


def test_an_unknown_window_never_refuses() -> None:
    out = run([U(BIG * 100)], settings=ctx(max_context_tokens=0))
    assert out.context_window is None
    assert out.estimated_tokens > 32_000


def test_the_budget_trims_before_the_capacity_check() -> None:
    rows = [U(BIG), A("one"), U("two"), A("two")]
    out = run(rows, Route("a", "openai", "m", 300))
    assert out.budget == 300
    assert out.rows == (breadcrumb_row(), *rows[2:])


# --- estimates --------------------------------------------------------------------------------


def image() -> Attachment:
    return Attachment(mime_type="image/png", data="iVBORw0KGgo=")


def test_tool_images_count_only_in_the_running_turn() -> None:
    old = T("c1", "shot", attachments=(image(),))
    new = T("c2", "shot", attachments=(image(),))
    rows = [U("one"), A("", "c1"), old, A("a"), U("two"), A("", "c2"), new]
    out = run(rows)
    expected = sum(row_tokens(r) for r in rows) + 1_600
    assert out.estimated_tokens == expected
    assert row_tokens(new, dispatch_tool_images=True) == row_tokens(old) + 1_600


def test_old_tool_images_do_not_force_a_trim() -> None:
    rows = [U("one"), A("", "c1"), T("c1", "shot", attachments=(image(),)), A("a"), U("two")]
    exact = sum(row_tokens(r) for r in rows)
    out = run(rows, settings=ctx(max_context_tokens=exact))
    assert out.trimmed is None
    assert out.estimated_tokens == exact


def test_user_attachments_always_count() -> None:
    rows = [U("one", attachments=(image(),)), A("a"), U("two"), A("b")]
    assert run(rows).estimated_tokens == sum(row_tokens(r) for r in rows)
    assert row_tokens(rows[0]) == row_tokens(U("one")) + 1_600


def test_an_empty_history_costs_its_tools_and_extra_tokens() -> None:
    out = run([], extra_tokens=7)
    assert out.rows == ()
    assert out.estimated_tokens == 7


def test_stored_rows_are_accepted() -> None:
    rows = [
        StoredMessage(role="user", content="hi", id=1, turn=1, tokens=5),
        StoredMessage(role="assistant", content="yo", id=2, turn=1, tokens=5),
    ]
    assert run(rows).rows == tuple(rows)


# --- parameters --------------------------------------------------------------------------------


def test_negative_extra_tokens_are_invalid() -> None:
    with pytest.raises(InvalidParams) as raised:
        run([U()], extra_tokens=-1)
    assert raised.value.field == "extra_tokens"


def test_negative_keep_tool_context_turns_is_invalid() -> None:
    with pytest.raises(InvalidParams) as raised:
        run([U()], keep_tool_context_turns=-1)
    assert raised.value.field == "keep_tool_context_turns"


def breadcrumb_row(summary: str | None = None) -> Message:
    """The context note of a request that dropped turns, with no summary standing in."""
    note = context_note(summary, has_coverage=False, stands_in=False, dropped=True)
    assert note is not None
    return note
