"""Stored-history retention (semantics.md, "Stored-history retention"): age → count → tokens,
whole oldest turns, system rows preserved, the newest turn kept by count and tokens. First the
failures of the per-message pruning this replaces, then one test per rule, then the same rules
through the manager (summary expiry, notifications, reports)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from rows import A, S, T, U

from chat_history.model import Message, PruneReport, StoredMessage, Trimmed
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import (
    needs_retention,
    plan_retention,
    summary_expired,
)
from chat_history.policy.tokens import stored_tokens
from chat_history.service import conversations, history
from chat_history.settings import Settings, default_settings
from chat_history.store import Key

pytestmark = pytest.mark.engines

T0 = 1_764_480_000_000
HOUR = 3_600_000
KEY = Key("ws", "conv")
BIG = "x" * 400  # 104 tokens as a row


def settings(**changes: Any) -> Settings:
    """Default settings with generous caps, so that a test enables only the rule it is about."""
    base = {"max_age_hours": 0.0, "max_messages": 10_000, "max_tokens": 0}
    return attrs.evolve(default_settings(), **{**base, **changes})


def rows_of(*messages: Message, start: int = T0, step: int = 1_000) -> list[StoredMessage]:
    """Rows as ``append`` would store them: turns numbered by the recording rules, ids from 1,
    one second apart unless a message carries its own timestamp."""
    planned = plan_append(
        last_turn=0, current_turn_rows=(), messages=messages, max_tool_result_chars=0
    )
    rows = []
    for index, row in enumerate(planned):
        message = row.message
        timestamp = message.timestamp if message.timestamp is not None else start + index * step
        fields = attrs.asdict(message, recurse=False) | {"timestamp": timestamp}
        rows.append(
            StoredMessage(**fields, id=index + 1, turn=row.turn, tokens=stored_tokens(message))
        )
    return rows


def at(timestamp: int, message: Message) -> Message:
    return attrs.evolve(message, timestamp=timestamp)


def kept(rows: Sequence[StoredMessage], plan_settings: Settings, now: int = T0) -> list[str]:
    """The contents of the rows retention keeps."""
    plan = plan_retention(rows, plan_settings, now)
    return [row.content for row in rows if row.id not in plan.delete_ids]


def tokens_of(rows: Sequence[StoredMessage]) -> int:
    return sum(row.tokens for row in rows)


# -- the failures of per-message pruning ----------------------------------------------------------


def test_oversized_newest_message_does_not_empty_history() -> None:
    rows = rows_of(U("u1"), A("a1"), U("u2 " + "x" * 4_000))
    assert kept(rows, settings(max_tokens=100)) == ["u2 " + "x" * 4_000]


def test_oversized_single_turn_is_kept_whole_and_reports_nothing() -> None:
    rows = rows_of(U("x" * 4_000), A("y" * 4_000))
    plan = plan_retention(rows, settings(max_tokens=100), T0)
    assert plan.delete_ids == frozenset()
    assert plan.report is None
    assert plan.events == ()


def test_system_rows_survive_a_token_cut() -> None:
    rows = rows_of(S("rules"), U("u1 " + BIG), S("mid-turn note"), A("a1 " + BIG), U("u2"), A("a2"))
    assert kept(rows, settings(max_tokens=60)) == ["rules", "mid-turn note", "u2", "a2"]


def test_count_rule_never_leaves_a_lone_tool_row() -> None:
    rows = rows_of(U("u"), A("", "c1"), T("c1"), A("done"))
    assert kept(rows, settings(max_messages=2)) == ["u", "", "file text", "done"]


def test_count_rule_deletes_the_older_turn_and_keeps_the_tool_exchange_whole() -> None:
    rows = rows_of(U("u0"), A("a0"), U("u"), A("", "c1"), T("c1"), A("done"))
    assert kept(rows, settings(max_messages=2)) == ["u", "", "file text", "done"]


def test_token_rule_deletes_a_tool_exchange_as_a_whole_turn() -> None:
    rows = rows_of(U("u1"), A("", "c1", "c2"), T("c1", BIG), T("c2", BIG), A("a1"), U("u2"))
    assert kept(rows, settings(max_tokens=50)) == ["u2"]


# -- age -------------------------------------------------------------------------------------------


def test_age_rule_may_empty_a_conversation() -> None:
    rows = rows_of(U("u1"), A("a1"), U("u2"), A("a2"))
    now = T0 + 2 * HOUR
    plan = plan_retention(rows, settings(max_age_hours=1), now)
    assert plan.delete_ids == {1, 2, 3, 4}
    assert plan.report == PruneReport(
        dropped_messages=4, dropped_turns=2, retained_turns=0, reasons=("age",)
    )


def test_age_rule_deletes_only_turns_whose_newest_row_is_expired() -> None:
    rows = rows_of(
        at(T0, U("old")),
        at(T0, A("old reply")),
        at(T0, U("spanning")),
        at(T0 + 3 * HOUR, A("recent reply")),
    )
    assert kept(rows, settings(max_age_hours=2), now=T0 + 4 * HOUR) == [
        "spanning",
        "recent reply",
    ]


def test_age_rule_keeps_system_rows_when_preserved() -> None:
    rows = rows_of(S("rules"), U("u1"), A("a1"))
    assert kept(rows, settings(max_age_hours=1), now=T0 + 2 * HOUR) == ["rules"]


def test_age_rule_deletes_expired_system_rows_when_not_preserved() -> None:
    rows = rows_of(S("rules"), U("u1"), A("a1"))
    plan_settings = settings(max_age_hours=1, preserve_system_messages=False)
    assert kept(rows, plan_settings, now=T0 + 2 * HOUR) == []


def test_age_rule_zero_hours_is_off() -> None:
    rows = rows_of(U("u1"), A("a1"))
    assert kept(rows, settings(max_age_hours=0), now=T0 + 10_000 * HOUR) == ["u1", "a1"]


def test_fractional_age_limit_is_honoured() -> None:
    rows = rows_of(U("u1"), A("a1"), start=T0)
    now = T0 + HOUR
    assert kept(rows, settings(max_age_hours=0.5), now=now) == []
    assert kept(rows, settings(max_age_hours=1.5), now=now) == ["u1", "a1"]


@pytest.mark.parametrize("hours", [1e9, 1e303])
def test_an_age_limit_beyond_the_epoch_expires_nothing(hours: float) -> None:
    rows = rows_of(U("u1"), A("a1"), start=0)
    plan_settings = settings(max_age_hours=hours)
    assert kept(rows, plan_settings, now=T0) == ["u1", "a1"]
    assert not summary_expired(0, plan_settings, T0)
    assert not needs_retention(
        settings=plan_settings, message_count=2, tokens=10, oldest_timestamp=0, now_ms=T0
    )


# -- count -----------------------------------------------------------------------------------------


def test_count_rule_zero_keeps_only_the_newest_turn() -> None:
    rows = rows_of(U("u1"), A("a1"), U("u2"), A("", "c1"), T("c1"), A("a2"))
    assert kept(rows, settings(max_messages=0)) == ["u2", "", "file text", "a2"]


def test_count_rule_deletes_oldest_turns_until_within_the_cap() -> None:
    rows = rows_of(U("u1"), A("a1"), U("u2"), A("a2"), U("u3"), A("a3"))
    assert kept(rows, settings(max_messages=4)) == ["u2", "a2", "u3", "a3"]
    assert kept(rows, settings(max_messages=3)) == ["u3", "a3"]
    assert kept(rows, settings(max_messages=6)) == ["u1", "a1", "u2", "a2", "u3", "a3"]


def test_system_rows_count_toward_the_message_cap() -> None:
    rows = rows_of(S("s1"), S("s2"), U("u1"), A("a1"), U("u2"), A("a2"))
    assert kept(rows, settings(max_messages=5)) == ["s1", "s2", "u2", "a2"]


def test_rows_before_the_first_user_message_are_the_oldest_turn() -> None:
    rows = rows_of(S("rules"), A("greeting"), U("u1"), A("a1"))
    assert rows[1].turn == 0
    assert kept(rows, settings(max_messages=3)) == ["rules", "u1", "a1"]


# -- tokens ----------------------------------------------------------------------------------------


def test_token_rule_zero_disables_it() -> None:
    rows = rows_of(*[U(BIG) for _ in range(20)])
    plan = plan_retention(rows, settings(max_tokens=0), T0)
    assert plan.delete_ids == frozenset()


def test_token_rule_deletes_until_within_the_cap() -> None:
    rows = rows_of(U(BIG), A(BIG), U(BIG), A(BIG), U("u3"), A("a3"))
    cap = tokens_of(rows[2:])
    assert kept(rows, settings(max_tokens=cap)) == [BIG, BIG, "u3", "a3"]
    assert kept(rows, settings(max_tokens=cap - 1)) == ["u3", "a3"]


def test_system_rows_count_toward_the_token_cap() -> None:
    rows = rows_of(S(BIG), U("u1"), A("a1"), U("u2"), A("a2"))
    cap = tokens_of(rows) - 1
    assert kept(rows, settings(max_tokens=cap)) == [BIG, "u2", "a2"]


# -- preserveSystemMessages off --------------------------------------------------------------------


def test_leading_system_rows_go_with_the_oldest_turn_when_not_preserved() -> None:
    rows = rows_of(S("s1"), S("s2"), U("u1"), A("a1"), U("u2"), A("a2"))
    plan_settings = settings(max_messages=2, preserve_system_messages=False)
    assert kept(rows, plan_settings) == ["u2", "a2"]


def test_leading_system_rows_of_a_single_turn_stay_when_not_preserved() -> None:
    rows = rows_of(S("s1"), U("u1"), A("a1"))
    plan_settings = settings(max_messages=0, preserve_system_messages=False)
    assert kept(rows, plan_settings) == ["s1", "u1", "a1"]


def test_mid_turn_system_row_goes_with_its_turn_when_not_preserved() -> None:
    rows = rows_of(U("u1"), S("note"), A("a1"), U("u2"), A("a2"))
    plan_settings = settings(max_messages=2, preserve_system_messages=False)
    assert kept(rows, plan_settings) == ["u2", "a2"]


def test_same_history_keeps_system_rows_when_preserved() -> None:
    rows = rows_of(S("s1"), S("s2"), U("u1"), S("note"), A("a1"), U("u2"), A("a2"))
    assert kept(rows, settings(max_messages=2)) == ["s1", "s2", "note", "u2", "a2"]


# -- order, reports and events ---------------------------------------------------------------------


def three_rule_history() -> list[StoredMessage]:
    """Turn 1 expires; turn 2 goes by count; turn 3 goes by tokens; turn 4 is kept."""
    return rows_of(
        at(T0, U("u1")),
        at(T0, A("a1")),
        at(T0 + 10 * HOUR, U("u2")),
        at(T0 + 10 * HOUR, A("a2")),
        at(T0 + 10 * HOUR, U("u3 " + BIG)),
        at(T0 + 10 * HOUR, A("a3")),
        at(T0 + 10 * HOUR, U("u4")),
        at(T0 + 10 * HOUR, A("a4")),
    )


THREE_RULES = {"max_age_hours": 5, "max_messages": 4, "max_tokens": 30}
NOW = T0 + 11 * HOUR


def test_rules_run_in_order_age_count_tokens() -> None:
    rows = three_rule_history()
    plan = plan_retention(rows, settings(**THREE_RULES), NOW)
    assert plan.report is not None
    assert plan.report.reasons == ("age", "count", "tokens")
    assert [event.reason for event in plan.events] == ["age", "count", "tokens"]
    assert [row.content for row in rows if row.id not in plan.delete_ids] == ["u4", "a4"]


def test_count_rule_counts_what_the_age_rule_left() -> None:
    rows = three_rule_history()
    plan = plan_retention(rows, settings(max_age_hours=5, max_messages=6), NOW)
    assert plan.report is not None
    assert plan.report.reasons == ("age",)
    assert plan.delete_ids == {1, 2}


def test_prune_report_totals_the_rules() -> None:
    rows = three_rule_history()
    plan = plan_retention(rows, settings(**THREE_RULES), NOW)
    assert plan.report == PruneReport(
        dropped_messages=6, dropped_turns=3, retained_turns=1, reasons=("age", "count", "tokens")
    )


def test_one_storage_event_per_reason_with_tokens_and_budget() -> None:
    rows = three_rule_history()
    total = tokens_of(rows)
    turn = [tokens_of(rows[i : i + 2]) for i in range(0, 8, 2)]
    plan = plan_retention(rows, settings(**THREE_RULES), NOW)
    age, count, tokens = plan.events
    assert age == Trimmed(
        scope="storage",
        reason="age",
        dropped_messages=2,
        dropped_turns=1,
        retained_turns=3,
        tokens_before=total,
        tokens_after=total - turn[0],
        budget=None,
    )
    assert count == Trimmed(
        scope="storage",
        reason="count",
        dropped_messages=2,
        dropped_turns=1,
        retained_turns=2,
        tokens_before=total - turn[0],
        tokens_after=total - turn[0] - turn[1],
        budget=None,
    )
    assert tokens == Trimmed(
        scope="storage",
        reason="tokens",
        dropped_messages=2,
        dropped_turns=1,
        retained_turns=1,
        tokens_before=turn[2] + turn[3],
        tokens_after=turn[3],
        budget=30,
    )


def test_a_rule_that_deletes_nothing_sends_no_event() -> None:
    rows = rows_of(U("u1"), A("a1"), U("u2"), A("a2"))
    plan = plan_retention(rows, settings(max_messages=2), T0)
    assert [event.reason for event in plan.events] == ["count"]
    assert plan.report is not None
    assert plan.report.reasons == ("count",)


def test_auto_pruning_off_deletes_nothing() -> None:
    rows = three_rule_history()
    off = settings(**THREE_RULES, enable_auto_pruning=False)
    plan = plan_retention(rows, off, NOW)
    assert plan.delete_ids == frozenset()
    assert plan.report is None
    assert plan.events == ()
    assert not needs_retention(
        settings=off, message_count=8, tokens=tokens_of(rows), oldest_timestamp=T0, now_ms=NOW
    )
    assert not summary_expired(T0, off, NOW)


def test_nothing_to_delete_gives_no_report() -> None:
    rows = rows_of(U("u1"), A("a1"))
    plan = plan_retention(rows, default_settings(), T0)
    assert plan == plan_retention([], default_settings(), T0)
    assert plan.report is None


def test_needs_retention_is_true_whenever_a_rule_would_delete() -> None:
    rows = three_rule_history()
    for changes in ({"max_age_hours": 5}, {"max_messages": 4}, {"max_tokens": 30}):
        rule_settings = settings(**changes)
        assert plan_retention(rows, rule_settings, NOW).delete_ids
        assert needs_retention(
            settings=rule_settings,
            message_count=len(rows),
            tokens=tokens_of(rows),
            oldest_timestamp=T0,
            now_ms=NOW,
        )


def test_needs_retention_is_false_within_every_limit() -> None:
    assert not needs_retention(
        settings=settings(max_age_hours=5, max_messages=8, max_tokens=1_000),
        message_count=8,
        tokens=1_000,
        oldest_timestamp=NOW - 5 * HOUR,
        now_ms=NOW,
    )


def test_summary_expires_with_the_age_rule() -> None:
    assert summary_expired(T0, settings(max_age_hours=1), T0 + 2 * HOUR)
    assert not summary_expired(T0, settings(max_age_hours=3), T0 + 2 * HOUR)
    assert not summary_expired(T0, settings(max_age_hours=0), T0 + 10_000 * HOUR)


# -- through the manager ---------------------------------------------------------------------------


def test_manager_age_rule_empties_the_conversation_and_its_summary(make_manager, clock) -> None:
    events: list[tuple[Key, Trimmed]] = []
    manager = make_manager(
        {"maxAgeHours": 1}, notify=lambda key, batch: events.extend((key, event) for event in batch)
    )
    history.append(manager, KEY, [U("u1"), A("a1")])
    history.save_summary(manager, KEY, "they talked")
    clock.advance_hours(2)

    result = history.get(manager, KEY)

    assert result.messages == ()
    assert result.summary is None
    assert result.pruned == PruneReport(
        dropped_messages=2, dropped_turns=1, retained_turns=0, reasons=("age",)
    )
    assert [(key, event.scope, event.reason, event.budget) for key, event in events] == [
        (KEY, "storage", "age", None)
    ]
    assert conversations.list_page(manager, "ws", None, None).conversations == ()


def test_manager_deletes_an_expired_summary_without_a_report(make_manager, clock) -> None:
    events: list[Trimmed] = []
    manager = make_manager({"maxAgeHours": 1}, notify=lambda key, batch: events.extend(batch))
    history.save_summary(manager, KEY, "old summary")
    clock.advance_hours(2)
    history.append(manager, KEY, [U("fresh")])

    result = history.get(manager, KEY)

    assert result.summary is None
    assert result.pruned is None
    assert [row.content for row in result.messages] == ["fresh"]
    assert events == []


def test_manager_keeps_a_summary_younger_than_the_limit(make_manager, clock) -> None:
    manager = make_manager({"maxAgeHours": 3})
    history.save_summary(manager, KEY, "recent summary")
    clock.advance_hours(2)
    summary = history.get_summary(manager, KEY)
    assert summary is not None
    assert summary.summary == "recent summary"


def test_manager_append_reports_and_notifies_each_rule(make_manager, clock) -> None:
    events: list[Trimmed] = []
    manager = make_manager(
        {"maxAgeHours": 5, "maxMessages": 4, "maxTokens": 30},
        notify=lambda key, batch: events.extend(batch),
    )
    history.append(manager, KEY, [U("u1"), A("a1")])
    clock.advance_hours(10)

    result = history.append(
        manager, KEY, [U("u2"), A("a2"), U("u3 " + BIG), A("a3"), U("u4"), A("a4")]
    )

    assert len(result.messages) == 6
    assert result.pruned == PruneReport(
        dropped_messages=6, dropped_turns=3, retained_turns=1, reasons=("age", "count", "tokens")
    )
    assert [(event.scope, event.reason, event.budget) for event in events] == [
        ("storage", "age", None),
        ("storage", "count", None),
        ("storage", "tokens", 30),
    ]
    assert [row.content for row in history.get(manager, KEY).messages] == ["u4", "a4"]


def test_manager_read_runs_retention_after_settings_tighten(make_manager) -> None:
    loose = make_manager({"maxMessages": 100})
    history.append(loose, KEY, [U("u1"), A("a1"), U("u2"), A("a2")])
    strict = make_manager({"maxMessages": 2})

    result = history.get(strict, KEY)

    assert [row.content for row in result.messages] == ["u2", "a2"]
    assert result.pruned == PruneReport(
        dropped_messages=2, dropped_turns=1, retained_turns=1, reasons=("count",)
    )
    assert history.get(strict, KEY).pruned is None


def test_manager_with_auto_pruning_off_keeps_everything(make_manager, clock) -> None:
    events: list[Trimmed] = []
    manager = make_manager(
        {"enableAutoPruning": False, "maxAgeHours": 1, "maxMessages": 0, "maxTokens": 10},
        notify=lambda key, batch: events.extend(batch),
    )
    history.append(manager, KEY, [U("u1 " + BIG), A("a1"), U("u2"), A("a2")])
    history.save_summary(manager, KEY, "summary")
    clock.advance_hours(5)

    result = history.get(manager, KEY)

    assert [row.content for row in result.messages] == ["u1 " + BIG, "a1", "u2", "a2"]
    assert result.pruned is None
    assert result.summary is not None
    assert events == []


@pytest.mark.parametrize("preserve", [True, False])
def test_manager_system_rows_follow_preserve_setting(make_manager, preserve: bool) -> None:
    manager = make_manager({"maxMessages": 2, "preserveSystemMessages": preserve})
    history.append(manager, KEY, [S("rules"), U("u1"), A("a1")])
    history.append(manager, KEY, [U("u2"), A("a2")])
    contents = [row.content for row in history.get(manager, KEY).messages]
    assert contents == (["rules", "u2", "a2"] if preserve else ["u2", "a2"])


def test_manager_with_a_huge_age_limit_still_answers(make_manager, clock) -> None:
    manager = make_manager({"maxAgeHours": 1e303})
    history.append(manager, KEY, [U("u1"), A("a1")])
    history.save_summary(manager, KEY, "summary")
    clock.advance_hours(100_000)
    result = history.get(manager, KEY)
    assert [row.content for row in result.messages] == ["u1", "a1"]
    assert result.summary is not None
