"""Stored-history retention (semantics.md): age → count → tokens, deleting whole oldest turns.

Pure: takes row metadata and settings, returns what to delete and why. The newest turn survives
the count and token rules; system rows survive everything while ``preserveSystemMessages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import attrs

from chat_history.model import PruneReport, Trimmed
from chat_history.settings import Settings

HOUR_MS = 3_600_000
StorageReason = Literal["age", "count", "tokens"]


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


def plan_retention(rows: Sequence[RowMeta], settings: Settings, now_ms: int) -> RetentionPlan:
    """Apply age, then count, then tokens to a conversation's rows (in id order)."""
    if not settings.enable_auto_pruning or not rows:
        return RetentionPlan(frozenset(), None, ())
    units = _units(rows, settings.preserve_system_messages)
    kept_count = len(rows)
    kept_tokens = sum(row.tokens for row in rows)
    deleted: set[int] = set()
    events: list[Trimmed] = []
    reasons: list[StorageReason] = []
    dropped_turns = 0

    def drop(unit: _Unit) -> None:
        nonlocal kept_count, kept_tokens, dropped_turns
        deleted.update(row.id for row in unit.rows)
        kept_count -= len(unit.rows)
        kept_tokens -= sum(row.tokens for row in unit.rows)
        dropped_turns += 1

    def record(
        reason: StorageReason,
        turns_before: int,
        count_before: int,
        tokens_before: int,
        budget: int | None,
    ) -> None:
        if kept_count == count_before:
            return
        reasons.append(reason)
        remaining = [row for row in rows if row.id not in deleted]
        events.append(
            Trimmed(
                scope="storage",
                reason=reason,
                dropped_messages=count_before - kept_count,
                dropped_turns=dropped_turns - turns_before,
                retained_turns=_retained_turns(remaining),
                tokens_before=tokens_before,
                tokens_after=kept_tokens,
                budget=budget,
            )
        )

    cutoff = age_cutoff(settings, now_ms)
    if cutoff is not None:
        before = (dropped_turns, kept_count, kept_tokens)
        for unit in [u for u in units if u.newest < cutoff]:
            drop(unit)
            units.remove(unit)
        record("age", *before, None)

    before = (dropped_turns, kept_count, kept_tokens)
    while kept_count > settings.max_messages and len(units) > 1:
        drop(units.pop(0))
    record("count", *before, None)

    if settings.max_tokens > 0:
        before = (dropped_turns, kept_count, kept_tokens)
        while kept_tokens > settings.max_tokens and len(units) > 1:
            drop(units.pop(0))
        record("tokens", *before, settings.max_tokens)

    if not deleted:
        return RetentionPlan(frozenset(), None, ())
    remaining = [row for row in rows if row.id not in deleted]
    report = PruneReport(
        dropped_messages=len(deleted),
        dropped_turns=dropped_turns,
        retained_turns=_retained_turns(remaining),
        reasons=tuple(reasons),
    )
    return RetentionPlan(frozenset(deleted), report, tuple(events))


def summary_expired(updated_at: int, settings: Settings, now_ms: int) -> bool:
    cutoff = age_cutoff(settings, now_ms)
    return cutoff is not None and updated_at < cutoff
