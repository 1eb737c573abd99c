"""Storage retention as the manager runs it on every read and write: the cheap checks on a
conversation's totals (so retention reads no history unless it has work to do), the plan
(``policy.retention``, pure) carried out inside a write transaction (whose commit purges what
it deleted), and after the commit the ``chatHistory/trimmed`` events. The rules themselves
live in the policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from chat_history.model import STORAGE_REASONS, Key, PruneReport, Trimmed
from chat_history.policy.retention import (
    RetentionPlan,
    age_cutoff,
    needs_retention,
    plan_retention,
    summary_expired,
)
from chat_history.settings import Settings
from chat_history.store import ConversationTotals, HistoryStore, Reading, Transaction
from chat_history.store.reply_section import ReplyReading
from chat_history.store.seam import write_retried

#: Retention plans that delete no rows.
_KEEP_ALL = RetentionPlan(frozenset(), None, ())
_KEEP_SUMMARY_GONE = RetentionPlan(frozenset(), None, (), deleted_summary=True)


@attrs.frozen
class Due:
    """What retention has to do for one conversation, told from its totals."""

    #: the summary has expired (the age rule)
    summary_gone: bool
    #: a retention rule could delete rows
    rows: bool

    def any(self) -> bool:
        """Whether there is anything to do."""
        return self.summary_gone or self.rows


_NOTHING_DUE = Due(summary_gone=False, rows=False)


class StorageRetention:
    """Retention of one store under ``settings`` (a value: the manager makes one per
    settings it runs under)."""

    def __init__(
        self,
        store: HistoryStore,
        settings: Settings,
        notify: Callable[[Key, Sequence[Trimmed]], None],
    ) -> None:
        self._store = store
        self._settings = settings
        self._notify = notify

    def due(self, tx: Reading, key: Key, now: int, totals: ConversationTotals | None) -> Due:
        """What is due (the summary expired, rows a rule could delete), from the conversation's
        ``totals`` and, only when the age rule is on, its summary's age."""
        settings = self._settings
        if not settings.enable_auto_pruning:
            return _NOTHING_DUE
        # A summary expires only by the age rule: without it, no need to read the summary.
        summary = tx.summary(key) if age_cutoff(settings, now) else None
        return Due(
            summary_gone=summary is not None and summary_expired(summary.updated_at, settings, now),
            rows=totals is not None
            and needs_retention(
                settings=settings,
                message_count=totals.message_count,
                tokens=totals.tokens,
                oldest_timestamp=totals.oldest_timestamp,
                now_ms=now,
            ),
        )

    def nothing_due(self, tx: Reading, key: Key, now: int) -> bool:
        """Whether a read may go ahead in ``tx`` (a snapshot) as it is: the common case, one
        read transaction. Else the caller runs ``run`` and reads in a new snapshot."""
        return not self.due(tx, key, now, tx.totals(key)).any()

    def apply(
        self, tx: Transaction, key: Key, now: int, totals: ConversationTotals | None
    ) -> RetentionPlan:
        """Retention inside the caller's write transaction; the caller calls ``finish`` with the
        plan after the commit."""
        due = self.due(tx, key, now, totals)
        summary_gone, rows_due = due.summary_gone, due.rows
        if summary_gone:
            tx.delete_summary(key)
        if not rows_due:
            return _KEEP_SUMMARY_GONE if summary_gone else _KEEP_ALL
        plan = attrs.evolve(
            plan_retention(
                tx.row_meta(key), self._settings, now, ReplyReading(tx).streaming_turns(key)
            ),
            deleted_summary=summary_gone,
        )
        if plan.delete_ids:
            tx.delete_rows(key, plan.delete_ids)
        return plan

    def finish(self, key: Key, plan: RetentionPlan) -> None:
        """After the commit (which purged what it deleted): the events are sent."""
        if plan.events:
            self._notify(key, plan.events)

    def run(self, key: Key, now: int) -> RetentionPlan:
        """Retention of one conversation in its own write transaction, finished."""
        plan = write_retried(
            self._store, (key,), lambda tx: self.apply(tx, key, now, tx.totals(key))
        )
        self.finish(key, plan)
        return plan

    def before_read(self, key: Key, now: int) -> PruneReport | None:
        """Retention before a read that does not share its snapshot: one read transaction when
        nothing is due."""
        with self._store.snapshot() as tx:
            if self.nothing_due(tx, key, now):
                return None
        return self.run(key, now).report

    def dry_run(self, key: Key, now: int) -> RetentionPlan:
        """The plan ``run`` would carry out now, on the same row metadata; nothing deleted."""
        settings = self._settings
        with self._store.read() as tx:
            summary = tx.summary(key)
            plan = plan_retention(
                tx.row_meta(key), settings, now, ReplyReading(tx).streaming_turns(key)
            )
        expired = (
            summary is not None
            and settings.enable_auto_pruning
            and summary_expired(summary.updated_at, settings, now)
        )
        return attrs.evolve(plan, deleted_summary=expired)


@attrs.frozen
class ConversationPruned:
    """What a ``prune`` run deleted (or would delete) in one conversation."""

    key: Key
    dropped_messages: int
    retained_turns: int | None
    #: rule -> (messages, turns) it deleted
    reasons: dict[str, tuple[int, int]]
    summary_deleted: bool


@attrs.frozen
class PruneRun:
    """A ``prune`` run over many conversations: what each lost, and the totals per rule
    (messages, turns, conversations)."""

    dry_run: bool
    checked: int
    conversations: tuple[ConversationPruned, ...]
    per_rule: dict[str, tuple[int, int, int]]
    deleted_summaries: int

    @property
    def dropped_messages(self) -> int:
        """The rows deleted (or that would be, in a dry run) across the run."""
        return sum(c.dropped_messages for c in self.conversations)


def tally(dry_run: bool, plans: Sequence[tuple[Key, RetentionPlan]]) -> PruneRun:
    """The run's record from each checked conversation's plan."""
    pruned: list[ConversationPruned] = []
    per_rule: dict[str, list[int]] = {rule: [0, 0, 0] for rule in STORAGE_REASONS}
    for key, plan in plans:
        if not plan.delete_ids and not plan.deleted_summary:
            continue
        reasons: dict[str, tuple[int, int]] = {}
        for event in plan.events:
            reasons[event.reason] = (event.dropped_messages, event.dropped_turns)
            counted = per_rule[event.reason]
            counted[0] += event.dropped_messages
            counted[1] += event.dropped_turns
            counted[2] += 1
        pruned.append(
            ConversationPruned(
                key=key,
                dropped_messages=len(plan.delete_ids),
                retained_turns=plan.report.retained_turns if plan.report else None,
                reasons=reasons,
                summary_deleted=plan.deleted_summary,
            )
        )
    return PruneRun(
        dry_run=dry_run,
        checked=len(plans),
        conversations=tuple(pruned),
        per_rule={rule: (m, t, c) for rule, (m, t, c) in per_rule.items()},
        deleted_summaries=sum(c.summary_deleted for c in pruned),
    )
