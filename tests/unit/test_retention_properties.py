"""Properties of stored-history retention (architecture.md, "Tests") over random histories that
obey the recording rules, tool exchanges and interrupted calls included: no orphaned tool rows or
calls, system rows preserved, whole turns only, oldest first, the newest turn kept by the count
and token rules, no more deleted than the rules need, and a second run deletes nothing."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.conftest import MakeStore

from chat_history.model import Message, StoredMessage, ToolCall
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import RetentionPlan, needs_retention, plan_retention
from chat_history.policy.tokens import stored_tokens
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import Settings, default_settings
from chat_history.store import HistoryStore, Key

T0 = 1_764_480_000_000
HOUR = 3_600_000
IN_TURN = ("[Tool results] ok", "[Tool call parse error] bad json", "[SOP: step 2]")

ACTIONS = (
    "system",
    "user",
    "user",
    "user",
    "in_turn_user",
    "text",
    "call",
    "call",
    "answer",
    "answer",
    "answer",
)


@attrs.frozen
class Step:
    action: str
    size: int
    gap_hours: int


steps_strategy = st.lists(
    st.builds(
        Step,
        st.sampled_from(ACTIONS),
        st.integers(0, 600),
        st.sampled_from([0, 0, 0, 0, 0, 1, 3, 12]),
    ),
    min_size=3,
    max_size=40,
)

settings_strategy = st.builds(
    lambda age, messages, tokens, preserve: attrs.evolve(
        default_settings(),
        max_age_hours=float(age),
        max_messages=messages,
        max_tokens=tokens,
        preserve_system_messages=preserve,
    ),
    st.sampled_from([0, 0, 0, 6, 24]),
    st.one_of(st.integers(0, 16), st.just(10_000)),
    st.one_of(st.just(0), st.integers(1, 800)),
    st.booleans(),
)


def messages_from(steps: Sequence[Step]) -> list[Message]:
    """Messages an agent loop could append: answers only to pending calls of the running turn;
    a real user message leaves the running turn's unanswered calls unanswered for good."""
    messages: list[Message] = []
    pending: list[str] = []
    next_call = 0
    clock = T0
    for step in steps:
        clock += step.gap_hours * HOUR + 1
        text = "w" * step.size
        if step.action == "system":
            message = Message(role="system", content="rules " + text)
        elif step.action == "user":
            message = Message(role="user", content="ask " + text)
            pending = []
        elif step.action == "in_turn_user":
            message = Message(role="user", content=IN_TURN[step.size % 3] + text)
        elif step.action == "call":
            calls = []
            for _ in range(step.size % 3 + 1):
                next_call += 1
                calls.append(ToolCall(id=f"call_{next_call}", name="read", arguments={"n": 1}))
            pending.extend(call.id for call in calls)
            message = Message(role="assistant", content="", tool_calls=tuple(calls))
        elif step.action == "answer" and pending:
            call_id = pending.pop(step.size % len(pending))
            message = Message(role="tool", content=text, tool_call_id=call_id, name="read")
        else:
            message = Message(role="assistant", content="reply " + text)
        messages.append(attrs.evolve(message, timestamp=clock))
    return messages


def stored_rows(messages: Sequence[Message]) -> list[StoredMessage]:
    planned = plan_append(
        last_turn=0, current_turn_rows=(), messages=messages, max_tool_result_chars=0
    )
    return [
        StoredMessage(
            **attrs.asdict(row.message, recurse=False),
            id=index + 1,
            turn=row.turn,
            tokens=stored_tokens(row.message),
        )
        for index, row in enumerate(planned)
    ]


def unanswered_calls(rows: Sequence[Message]) -> set[str]:
    calls = {call.id for row in rows for call in row.tool_calls}
    return calls - {row.tool_call_id for row in rows if row.role == "tool"}


def assert_no_orphans(before: Sequence[StoredMessage], after: Sequence[StoredMessage]) -> None:
    """Every kept tool row follows its call in the same turn; every kept call is answered unless
    it was unanswered before retention ran."""
    seen: dict[str, int] = {}
    for row in after:
        for call in row.tool_calls:
            seen[call.id] = row.turn
        if row.role == "tool":
            assert seen.get(row.tool_call_id) == row.turn, f"orphaned tool row {row.id}"
    assert unanswered_calls(after) <= unanswered_calls(before)


def retention_units(rows: Sequence[StoredMessage], preserve: bool) -> dict[int, list[int]]:
    """Row ids per stored turn number, as retention must move them: system rows excluded when
    preserved; otherwise leading system rows go with the oldest turn they precede."""
    units: dict[int, list[int]] = {}
    for row in rows:
        if preserve and row.role == "system":
            continue
        units.setdefault(row.turn, []).append(row.id)
    roles = {row.id: row.role for row in rows}
    turns = sorted(units)
    if len(turns) > 1 and all(roles[i] == "system" for i in units[turns[0]]):
        units[turns[1]][:0] = units.pop(turns[0])
    return units


def kept_after(rows: Sequence[StoredMessage], delete_ids: frozenset[int]) -> list[StoredMessage]:
    return [row for row in rows if row.id not in delete_ids]


@attrs.frozen
class Run:
    """One retention run on a generated history."""

    rows: list[StoredMessage]
    settings: Settings
    now: int
    plan: RetentionPlan
    after: list[StoredMessage]
    units: dict[int, list[int]]

    @property
    def kept_turns(self) -> list[int]:
        return [t for t, ids in sorted(self.units.items()) if ids[0] not in self.plan.delete_ids]

    @property
    def deleted_turns(self) -> list[int]:
        return [t for t, ids in sorted(self.units.items()) if ids[0] in self.plan.delete_ids]


@st.composite
def runs(draw: st.DrawFn) -> Run:
    rows = stored_rows(messages_from(draw(steps_strategy)))
    rule_settings = draw(settings_strategy)
    now = rows[-1].timestamp + draw(st.integers(0, 48)) * HOUR
    plan = plan_retention(rows, rule_settings, now)
    return Run(
        rows=rows,
        settings=rule_settings,
        now=now,
        plan=plan,
        after=kept_after(rows, plan.delete_ids),
        units=retention_units(rows, rule_settings.preserve_system_messages),
    )


retention_property = settings(
    max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@retention_property
@given(run=runs())
def test_retention_never_orphans_a_tool_row_or_a_call(run: Run) -> None:
    assert_no_orphans(run.rows, run.after)


@retention_property
@given(run=runs())
def test_retention_keeps_every_system_row_when_preserved(run: Run) -> None:
    if run.settings.preserve_system_messages:
        system = [r.id for r in run.rows if r.role == "system"]
        assert [r.id for r in run.after if r.role == "system"] == system


@retention_property
@given(run=runs())
def test_retention_deletes_whole_turns_oldest_first_and_keeps_order(run: Run) -> None:
    assert run.plan.delete_ids <= {row.id for row in run.rows}
    assert [row.id for row in run.after] == sorted(row.id for row in run.after)
    for turn, ids in run.units.items():
        assert len({row_id in run.plan.delete_ids for row_id in ids}) == 1, f"turn {turn} split"
    turns = sorted(run.units)
    assert run.kept_turns == turns[len(turns) - len(run.kept_turns) :]


@retention_property
@given(run=runs())
def test_count_and_token_rules_keep_the_newest_turn(run: Run) -> None:
    if not run.units:
        return
    newest = max(run.units)
    newest_row = max(r.timestamp for r in run.rows if r.id in run.units[newest])
    cutoff = run.now - int(run.settings.max_age_hours * HOUR)
    if run.settings.max_age_hours == 0 or newest_row >= cutoff:
        assert newest in run.kept_turns


@retention_property
@given(run=runs())
def test_caps_hold_and_no_more_is_deleted_than_they_need(run: Run) -> None:
    if len(run.kept_turns) > 1:
        assert len(run.after) <= run.settings.max_messages
        if run.settings.max_tokens > 0:
            assert sum(r.tokens for r in run.after) <= run.settings.max_tokens
    # Without the age rule, keeping the newest deleted turn too would break a cap.
    if run.settings.max_age_hours == 0 and run.deleted_turns:
        restored = set(run.units[run.deleted_turns[-1]])
        back = [r for r in run.rows if r.id not in run.plan.delete_ids or r.id in restored]
        over_count = len(back) > run.settings.max_messages
        over_tokens = 0 < run.settings.max_tokens < sum(r.tokens for r in back)
        assert over_count or over_tokens


@retention_property
@given(run=runs())
def test_a_second_run_deletes_nothing(run: Run) -> None:
    again = plan_retention(run.after, run.settings, run.now)
    assert again.delete_ids == frozenset()
    assert again.report is None
    assert again.events == ()


@retention_property
@given(run=runs())
def test_report_and_events_add_up(run: Run) -> None:
    plan = run.plan
    if not plan.delete_ids:
        assert plan.report is None and plan.events == ()
        return
    assert plan.report is not None
    assert plan.report.dropped_messages == len(plan.delete_ids)
    assert plan.report.dropped_turns == len(run.deleted_turns)
    assert plan.report.retained_turns == len({r.turn for r in run.after if r.role != "system"})
    assert plan.report.reasons == tuple(event.reason for event in plan.events)
    assert len(set(plan.report.reasons)) == len(plan.report.reasons)
    assert sum(e.dropped_messages for e in plan.events) == len(plan.delete_ids)
    assert sum(e.dropped_turns for e in plan.events) == len(run.deleted_turns)
    assert plan.events[0].tokens_before == sum(r.tokens for r in run.rows)
    for earlier, later in itertools.pairwise(plan.events):
        assert later.tokens_before == earlier.tokens_after
    assert plan.events[-1].tokens_after == sum(r.tokens for r in run.after)
    for event in plan.events:
        assert event.scope == "storage"
        assert event.budget == (run.settings.max_tokens if event.reason == "tokens" else None)


@retention_property
@given(run=runs())
def test_the_quick_check_never_misses_a_deletion(run: Run) -> None:
    if run.plan.delete_ids:
        assert needs_retention(
            settings=run.settings,
            message_count=len(run.rows),
            tokens=sum(r.tokens for r in run.rows),
            oldest_timestamp=min(r.timestamp for r in run.rows),
            now_ms=run.now,
        )


@settings(max_examples=300, deadline=None)
@given(steps=steps_strategy, later=st.integers(0, 48))
def test_auto_pruning_off_never_deletes(steps: list[Step], later: int) -> None:
    rows = stored_rows(messages_from(steps))
    off = attrs.evolve(
        default_settings(), enable_auto_pruning=False, max_messages=0, max_tokens=1, max_age_hours=1
    )
    plan = plan_retention(rows, off, rows[-1].timestamp + later * HOUR)
    assert plan.delete_ids == frozenset()


#: One database for the property's examples (hypothesis runs them in one call of the test): a
#: conversation of its own for each.
EXAMPLES = itertools.count(1)


@pytest.fixture
def store(make_store: MakeStore) -> HistoryStore:
    return make_store()


@st.composite
def chunked(draw: st.DrawFn) -> list[list[Message]]:
    """A generated history split into append requests at random points."""
    messages = messages_from(draw(steps_strategy))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(messages) - 1)), max_size=8)))
    bounds = [0, *[c for c in cuts if c < len(messages)], len(messages)]
    return [messages[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    requests=chunked(),
    max_messages=st.integers(0, 20),
    max_tokens=st.one_of(st.just(0), st.integers(1, 1_500)),
    preserve=st.booleans(),
)
@pytest.mark.engines
def test_manager_appends_keep_stored_history_consistent(
    store: HistoryStore,
    requests: list[list[Message]],
    max_messages: int,
    max_tokens: int,
    preserve: bool,
) -> None:
    """The same histories appended request by request through a real database: every append is
    accepted (the running turn is never pruned from under a pending call), stored turn numbers
    are those of the whole history, and the stored history never holds an orphan."""
    rule_settings = attrs.evolve(
        default_settings(),
        max_age_hours=0.0,
        max_messages=max_messages,
        max_tokens=max_tokens,
        preserve_system_messages=preserve,
    )
    every = [message for request in requests for message in request]
    expected_turns = [row.turn for row in stored_rows(every)]
    key = Key("ws", f"prop{next(EXAMPLES)}")
    manager = ChatHistoryManager(store, rule_settings, clock=lambda: T0)
    appended: list[StoredMessage] = []
    for request in requests:
        result = history.append(manager, key, request)
        assert [row.content for row in result.messages] == [m.content for m in request]
        appended.extend(result.messages)
        stored = list(history.get(manager, key).messages)
        assert_no_orphans(appended, stored)
        assert history.get(manager, key).pruned is None
        if preserve:
            assert [r.id for r in appended if r.role == "system"] == [
                r.id for r in stored if r.role == "system"
            ]
    assert [row.turn for row in appended] == expected_turns
    assert [row.id for row in appended] == sorted(row.id for row in appended)
