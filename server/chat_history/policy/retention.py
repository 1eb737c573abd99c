"""Stored-history retention (semantics.md): age → count → tokens, deleting whole oldest turns.

Pure: takes row metadata and settings, returns what to delete and why. The newest turn survives
the count and token rules; system rows survive everything while ``preserveSystemMessages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from chat_history.model import PruneReport, StorageReason, Trimmed
from chat_history.settings import Settings

HOUR_MS = 3_600_000


class RowMeta(Protocol):
    """What retention needs of a stored row (a StoredMessage or a light database row)."""

    @property
    def id(self) -> int: ...
    @property
    def turn(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def timestamp(self) -> int: ...


@attrs.frozen
class RetentionPlan:
    """Row ids to delete, the report for the request, and one event per rule that deleted."""

    delete_ids: frozenset[int]
    report: PruneReport | None
    events: tuple[Trimmed, ...]
    #: set by the manager when the same pass deleted an expired summary
    deleted_summary: bool = False

    @property
    def dropped_branches(self) -> int:
        """The inactive branches the plan deleted whole (version 5)."""
        return self.report.dropped_branches if self.report is not None else 0


@attrs.define
class _Unit:
    """A turn as retention deletes it: the rows that go when it goes."""

    turn: int
    rows: list[RowMeta]

    @property
    def newest(self) -> int:
        return max(row.timestamp for row in self.rows)


def age_cutoff(settings: Settings, now_ms: int) -> int | None:
    """Rows older than this (epoch ms) are expired; None when the age rule is off."""
    if not settings.enable_auto_pruning or settings.max_age_hours <= 0:
        return None
    span = settings.max_age_hours * HOUR_MS
    if span >= now_ms:  # reaches back before the epoch (or overflows to inf): nothing expires
        return None
    return now_ms - int(span)


def needs_retention(
    *,
    settings: Settings,
    message_count: int,
    tokens: int,
    oldest_timestamp: int | None,
    now_ms: int,
) -> bool:
    """The O(1) check on per-conversation totals: could any rule delete something?"""
    if not settings.enable_auto_pruning or message_count == 0:
        return False
    cutoff = age_cutoff(settings, now_ms)
    if cutoff is not None and oldest_timestamp is not None and oldest_timestamp < cutoff:
        return True
    if message_count > settings.max_messages:
        return True
    return settings.max_tokens > 0 and tokens > settings.max_tokens


def _units(rows: Sequence[RowMeta], preserve_system: bool) -> list[_Unit]:
    units: dict[int, _Unit] = {}
    for row in rows:
        if preserve_system and row.role == "system":
            continue
        units.setdefault(row.turn, _Unit(row.turn, [])).rows.append(row)
    ordered = [units[t] for t in sorted(units)]
    if (
        not preserve_system
        and len(ordered) > 1
        and all(r.role == "system" for r in ordered[0].rows)
    ):
        # Leading system rows go with the oldest turn they precede.
        ordered[1].rows[:0] = ordered[0].rows
        ordered.pop(0)
    return ordered


def _retained_turns(rows: Sequence[RowMeta]) -> int:
    return len({row.turn for row in rows if row.role != "system"})


class _Pruning:
    """One retention run over a conversation: the turns still kept, the running figures, and the
    report and events of each rule that deleted something."""

    def __init__(self, rows: Sequence[RowMeta], settings: Settings) -> None:
        self.rows = rows
        self.units = _units(rows, settings.preserve_system_messages)
        self.kept_count = len(rows)
        self.kept_tokens = sum(row.tokens for row in rows)
        self.deleted: set[int] = set()
        self.dropped_turns = 0
        self.events: list[Trimmed] = []
        self.reasons: list[StorageReason] = []

    def drop(self, unit: _Unit) -> None:
        self.deleted.update(row.id for row in unit.rows)
        self.kept_count -= len(unit.rows)
        self.kept_tokens -= sum(row.tokens for row in unit.rows)
        self.dropped_turns += 1

    def drop_oldest_while(self, over: Callable[[], bool]) -> None:
        """Delete the oldest turn while ``over()`` holds, never the newest turn."""
        while over() and len(self.units) > 1:
            self.drop(self.units.pop(0))

    def rule(self, reason: StorageReason, budget: int | None, apply: Callable[[], None]) -> None:
        """Run one rule; when it deleted rows, add its reason and its ``trimmed`` event."""
        turns_before, count_before, tokens_before = (
            self.dropped_turns,
            self.kept_count,
            self.kept_tokens,
        )
        apply()
        if self.kept_count == count_before:
            return
        self.reasons.append(reason)
        self.events.append(
            Trimmed(
                scope="storage",
                reason=reason,
                dropped_messages=count_before - self.kept_count,
                dropped_turns=self.dropped_turns - turns_before,
                retained_turns=_retained_turns(self.remaining()),
                tokens_before=tokens_before,
                tokens_after=self.kept_tokens,
                budget=budget,
            )
        )

    def remaining(self) -> list[RowMeta]:
        return [row for row in self.rows if row.id not in self.deleted]

    def plan(self) -> RetentionPlan:
        if not self.deleted:
            return RetentionPlan(frozenset(), None, ())
        report = PruneReport(
            dropped_messages=len(self.deleted),
            dropped_turns=self.dropped_turns,
            retained_turns=_retained_turns(self.remaining()),
            reasons=tuple(self.reasons),
        )
        return RetentionPlan(frozenset(self.deleted), report, tuple(self.events))


def _age_rule(run: _Pruning, cutoff: int) -> None:
    """Every turn whose newest row is older than the cutoff (this rule may empty the
    conversation: old history is deleted for privacy)."""
    for unit in [u for u in run.units if u.newest < cutoff]:
        run.drop(unit)
        run.units.remove(unit)


def plan_retention(
    rows: Sequence[RowMeta],
    settings: Settings,
    now_ms: int,
    protected: frozenset[int] = frozenset(),
) -> RetentionPlan:
    """Apply age, then count, then tokens to a conversation's rows (in id order). The turns in
    ``protected`` (a streaming reply's: protocol.md "Replies in flight") are never deleted."""
    if not settings.enable_auto_pruning or not rows:
        return RetentionPlan(frozenset(), None, ())
    run = _Pruning(rows, settings)
    run.units = [unit for unit in run.units if unit.turn not in protected]
    cutoff = age_cutoff(settings, now_ms)
    if cutoff is not None:
        run.rule("age", None, lambda: _age_rule(run, cutoff))
    run.rule(
        "count", None, lambda: run.drop_oldest_while(lambda: run.kept_count > settings.max_messages)
    )
    if settings.max_tokens > 0:
        run.rule(
            "tokens",
            settings.max_tokens,
            lambda: run.drop_oldest_while(lambda: run.kept_tokens > settings.max_tokens),
        )
    return run.plan()


def with_branches(plan: RetentionPlan, rows: Sequence[RowMeta], dropped: int) -> RetentionPlan:
    """``plan`` that also deleted ``dropped`` inactive branches (version 5: their rows are not
    the active path's ``rows``, which the report counts)."""
    report = plan.report or PruneReport(
        dropped_messages=0, dropped_turns=0, retained_turns=_retained_turns(rows), reasons=()
    )
    return attrs.evolve(plan, report=attrs.evolve(report, dropped_branches=dropped))


def summary_expired(updated_at: int, settings: Settings, now_ms: int) -> bool:
    """Whether a summary last saved at ``updated_at`` is older than the age limit (none: never)."""
    cutoff = age_cutoff(settings, now_ms)
    return cutoff is not None and updated_at < cutoff
