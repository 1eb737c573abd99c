"""ChatHistoryManager: the service API every handler (and the CLI) calls. It composes the pure
policy with the store: one transaction per operation, retention on every read and write, and the
``chatHistory/trimmed`` events to send. No pygls here."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Message, PruneReport, StoredMessage, Summary, ToolSpec, Trimmed
from chat_history.policy.imports import covered_id, match_stored
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import (
    RetentionPlan,
    age_cutoff,
    needs_retention,
    plan_retention,
    summary_expired,
)
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user
from chat_history.settings import Settings, default_settings
from chat_history.store import Key, Store
from chat_history.store.db import (
    ConversationRecord,
    ConversationTotals,
    DatabaseStats,
    StoredSummary,
)

if TYPE_CHECKING:
    from chat_history.policy.budget import Route
    from chat_history.policy.context import OmittedTurns, Prepared

#: Receives one request's ``chatHistory/trimmed`` events together (never an empty batch).
Notify = Callable[[Key, Sequence[Trimmed]], None]


#: Retention plans that delete no rows.
_KEEP_ALL = RetentionPlan(frozenset(), None, ())
_KEEP_SUMMARY_GONE = RetentionPlan(frozenset(), None, (), deleted_summary=True)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@attrs.frozen
class AppendResult:
    messages: tuple[StoredMessage, ...]
    pruned: PruneReport | None


@attrs.frozen
class GetResult:
    messages: tuple[StoredMessage, ...]
    summary: Summary | None
    pruned: PruneReport | None
    has_more: bool


@attrs.frozen
class ImportedSummary:
    """A summary from an export; it covered the first ``covers_messages`` exported messages."""

    summary: str
    updated_at: int
    covers_messages: int | None


@attrs.frozen
class ImportResult:
    imported: tuple[StoredMessage, ...]
    #: leading messages the conversation already held (policy.imports)
    skipped: int
    summary_saved: bool


@attrs.frozen(kw_only=True)
class ProviderRequest:
    provider: str
    model: str | None
    body: dict[str, object]


@attrs.frozen(kw_only=True)
class PreparedRequest:
    provider: str
    model: str | None
    body: dict[str, object]
    estimated_tokens: int
    budget: int | None
    context_window: int | None
    trimmed: object | None  # policy.context.RequestTrim
    collapsed_tool_rows: int
    collapsed_turns: int


@attrs.frozen(kw_only=True)
class PrepareOptions:
    provider: str | None = None
    model: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    extra_tokens: int = 0
    overflow_recovery: bool = False
    keep_tool_context_turns: int | None = None


def _summary(stored: StoredSummary | None) -> Summary | None:
    if stored is None:
        return None
    return Summary(
        summary=stored.summary,
        updated_at=stored.updated_at,
        covers_through_id=stored.covers_through_id,
    )


class ChatHistoryManager:
    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        notify: Notify | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.store = store
        self.settings = settings or default_settings()
        self._notify = notify or (lambda key, events: None)
        self._clock = clock
        self._lock = threading.RLock()

    # -- retention -------------------------------------------------------------------------

    def _due(
        self,
        connection: sqlite3.Connection,
        key: Key,
        now: int,
        totals: ConversationTotals | None,
    ) -> tuple[bool, bool]:
        """(the summary has expired, a retention rule could delete rows): the cheap checks on
        the conversation's ``totals``, so retention reads no history unless it has work to do."""
        settings = self.settings
        if not settings.enable_auto_pruning:
            return False, False
        # A summary expires only by the age rule: without it, no need to read the summary.
        summary = self.store.summary(connection, key) if age_cutoff(settings, now) else None
        return (
            summary is not None and summary_expired(summary.updated_at, settings, now),
            totals is not None
            and needs_retention(
                settings=settings,
                message_count=totals.message_count,
                tokens=totals.tokens,
                oldest_timestamp=totals.oldest_timestamp,
                now_ms=now,
            ),
        )

    def _retain_in(
        self,
        connection: sqlite3.Connection,
        key: Key,
        now: int,
        totals: ConversationTotals | None,
    ) -> RetentionPlan:
        """Retention inside the caller's write transaction."""
        summary_gone, rows_due = self._due(connection, key, now, totals)
        if summary_gone:
            self.store.delete_summary(connection, key)
        if not rows_due:
            return _KEEP_SUMMARY_GONE if summary_gone else _KEEP_ALL
        plan = attrs.evolve(
            plan_retention(self.store.row_meta(connection, key), self.settings, now),
            deleted_summary=summary_gone,
        )
        if plan.delete_ids:
            self.store.delete_rows(connection, key, plan.delete_ids)
        return plan

    def _after_delete(self, key: Key, plan: RetentionPlan) -> None:
        if plan.delete_ids or plan.deleted_summary:
            self.store.reset_wal()
        if plan.events:
            self._notify(key, plan.events)

    def _retain_for_read(self, key: Key) -> PruneReport | None:
        now = self._clock()
        with self.store.snapshot() as connection:
            if self._nothing_due(connection, key, now):
                return None
        return self._retain_now(key, now)

    def _nothing_due(self, connection: sqlite3.Connection, key: Key, now: int) -> bool:
        """Retention before a read, checked in the read's own snapshot on the totals the store
        may remember: the common case is one read transaction. Else the caller runs
        ``_retain_now`` and reads in a new snapshot."""
        return not any(self._due(connection, key, now, self.store.tail_totals(connection, key)))

    def _retain_now(self, key: Key, now: int) -> PruneReport | None:
        with self.store.write() as connection:
            plan = self._retain_in(connection, key, now, self.store.tail_totals(connection, key))
        self._after_delete(key, plan)
        return plan.report

    def _record_in(
        self,
        connection: sqlite3.Connection,
        key: Key,
        totals: ConversationTotals | None,
        messages: Sequence[Message],
        *,
        max_tool_result_chars: int,
        now: int,
    ) -> tuple[list[StoredMessage], ConversationTotals]:
        """The recording rules (turns, tool rows answering calls) and the insert; returns the
        stored rows and the conversation's new totals. Rows without a timestamp get ``now``."""
        # The current turn's rows matter only to a tool row (its pending calls) or to a new
        # turn (which completes the current one, whose figures are then recorded).
        current: list[StoredMessage] = []
        if totals is not None and any(m.role == "tool" or is_real_user(m) for m in messages):
            current = self.store.current_turn(connection, key, totals)
        planned = plan_append(
            last_turn=totals.last_turn if totals else 0,
            current_turn_rows=current,
            messages=messages,
            max_tool_result_chars=max_tool_result_chars,
        )
        stored, after = self.store.insert(
            connection,
            key,
            [(p.message, p.turn, stored_tokens(p.message)) for p in planned],
            totals,
            now,
        )
        self._record_completed_turns(connection, key, [*current, *stored])
        return stored, after

    def _record_completed_turns(
        self, connection: sqlite3.Connection, key: Key, rows: Sequence[StoredMessage]
    ) -> None:
        """The figures of every turn in ``rows`` (the current turn and the rows just written)
        that a later turn now follows: what ``prepare`` counts for a turn it does not read."""
        if not rows or rows[0].turn == rows[-1].turn:
            return
        from chat_history.policy.context import turn_figures

        completed: list[tuple[int, tuple[int, ...]]] = []
        start = 0
        for index in range(1, len(rows)):
            if rows[index].turn != rows[start].turn:
                figures = turn_figures(rows[start:index])
                if figures.turns:
                    completed.append((rows[start].turn, figures.as_tuple()))
                start = index
        self.store.add_turn_figures(connection, key, completed)

    # -- the service API -------------------------------------------------------------------

    def append(self, key: Key, messages: Sequence[Message]) -> AppendResult:
        with self._lock:
            now = self._clock()
            with self.store.write() as connection:
                stored, totals = self._record_in(
                    connection,
                    key,
                    self.store.tail_totals(connection, key),
                    messages,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                    now=now,
                )
                plan = self._retain_in(connection, key, now, totals)
            self._after_delete(key, plan)
            return AppendResult(tuple(stored), plan.report)

    def get(self, key: Key, limit: int | None = None, before_id: int | None = None) -> GetResult:
        with self._lock:
            now = self._clock()
            with self.store.snapshot() as connection:
                if self._nothing_due(connection, key, now):
                    return self._read_page(connection, key, limit, before_id, None)
            pruned = self._retain_now(key, now)
            with self.store.snapshot() as connection:
                return self._read_page(connection, key, limit, before_id, pruned)

    def _read_page(
        self,
        connection: sqlite3.Connection,
        key: Key,
        limit: int | None,
        before_id: int | None,
        pruned: PruneReport | None,
    ) -> GetResult:
        if limit is None:
            rows = self.store.all_rows(connection, key)
            if before_id is not None:
                rows = [row for row in rows if row.id < before_id]
            has_more = False
        else:
            rows, has_more = self.store.page(connection, key, limit, before_id)
        summary = _summary(self.store.summary(connection, key))
        return GetResult(tuple(rows), summary, pruned, has_more)

    def history(self, key: Key) -> tuple[list[StoredMessage], Summary | None]:
        """The whole pruned history and its summary (format, prepare, CLI)."""
        with self._lock:
            self._retain_for_read(key)
            with self.store.read() as connection:
                return (
                    self.store.all_rows(connection, key),
                    _summary(self.store.summary(connection, key)),
                )

    def _request_rows(
        self, key: Key, route: Route, options: PrepareOptions
    ) -> tuple[list[StoredMessage], OmittedTurns | None, Summary | None]:
        """What ``prepare`` reads: the newest turns it can send, all older system rows and the
        figures of the older turns (so the cost follows the request, not the history), or every
        row when those figures are missing or do not add up to the store's totals."""
        with self._lock:
            now = self._clock()
            with self.store.snapshot() as connection:
                if self._nothing_due(connection, key, now):
                    return self._read_request_rows(connection, key, route, options)
            self._retain_now(key, now)
            with self.store.snapshot() as connection:
                return self._read_request_rows(connection, key, route, options)

    def _read_request_rows(
        self, connection: sqlite3.Connection, key: Key, route: Route, options: PrepareOptions
    ) -> tuple[list[StoredMessage], OmittedTurns | None, Summary | None]:
        summary = _summary(self.store.summary(connection, key))
        window = self._window(connection, key, route, options)
        if window is None:
            return self.store.all_rows(connection, key), None, summary
        return window[0], window[1], summary

    def _window(
        self, connection: sqlite3.Connection, key: Key, route: Route, options: PrepareOptions
    ) -> tuple[list[StoredMessage], OmittedTurns | None] | None:
        from chat_history.policy.budget import effective_budget
        from chat_history.policy.context import OmittedTurns, TurnFigures, turn_floor
        from chat_history.policy.turns import is_real_user

        context = self.settings.context
        keep_turns = max(1, context.max_history_turns)
        keep_tools = options.keep_tool_context_turns
        if keep_tools is None:
            keep_tools = context.tool_context_turns()
        budget = effective_budget(context, route)
        newest: list[StoredMessage] = []
        units = floor = 0
        unit_end = 0
        # Newest first, turn by turn, until the turns left are ones the request drops: past the
        # turn limit, or past the budget by a lower bound of the turns read (then the budget step
        # runs and drops them). Never fewer than keepToolContextTurns + 1, so every turn left out
        # is collapsed like the figures assume.
        with contextlib.closing(self.store.newest_first(connection, key)) as rows:
            for row in rows:
                newest.append(row)
                if row.role != "user" or not is_real_user(row):
                    continue
                units += 1
                floor += turn_floor(tuple(newest[unit_end:][::-1]))
                unit_end = len(newest)
                if units > keep_tools and (units >= keep_turns or 0 < budget < floor):
                    break
            else:
                return newest[::-1], None  # the whole conversation was read
        window = newest[::-1]
        start = window[0]
        system = self.store.system_rows(connection, key, start.id)
        oldest = self.store.oldest_spoken_turn(connection, key)
        if oldest is None or oldest >= start.turn:
            return [*system, *window], None  # only system rows are older
        # The turn limit keeps `keep_turns`: older omitted turns are dropped by it, the rest
        # by the budget step. Turn numbers of the stored turns are consecutive.
        split = max(oldest, start.turn - max(0, keep_turns - units))
        groups: list[TurnFigures] = []
        for first, last in ((oldest, split - 1), (split, start.turn - 1)):
            if first > last:
                groups.append(TurnFigures())
                continue
            values = self.store.figures_between(connection, key, first, last)
            if values is None:
                return None  # turns written before schema 2
            groups.append(TurnFigures(*values))
        omitted = OmittedTurns(*groups)
        both = omitted.beyond_limit + omitted.within_limit
        totals = self.store.tail_totals(connection, key)
        assert totals is not None
        left_out = (
            totals.message_count - len(system) - len(window),
            totals.tokens - sum(r.tokens for r in system) - sum(r.tokens for r in window),
        )
        if (both.spoken_rows, both.spoken_tokens) != left_out:
            return None  # a turn deleted out of order, or turns without figures
        if options.tools is not None and both.tool_dependent:
            return None  # their collapse depends on this request's tool names
        return [*system, *window], omitted

    def format(
        self,
        key: Key,
        provider: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> ProviderRequest:
        from chat_history.policy.budget import resolve_route
        from chat_history.providers import format_body

        del tools  # accepted for symmetry with prepare; format sends the whole history
        route = resolve_route(provider or self.settings.active_provider, model, self.settings)
        rows, _ = self.history(key)
        return ProviderRequest(
            provider=route.name, model=route.model, body=format_body(route.kind, rows, route.model)
        )

    def prepare(self, key: Key, options: PrepareOptions) -> PreparedRequest:
        from chat_history.policy.budget import resolve_route
        from chat_history.policy.context import OmittedTurnsKept, RequestOptions, prepare_rows
        from chat_history.providers import format_body

        route = resolve_route(
            options.provider or self.settings.active_provider, options.model, self.settings
        )

        def prepare(rows: Sequence[Message], omitted: OmittedTurns | None) -> Prepared:
            return prepare_rows(
                rows,
                RequestOptions(
                    settings=self.settings.context,
                    route=route,
                    summary=summary.summary if summary else None,
                    tools=options.tools,
                    extra_tokens=options.extra_tokens,
                    overflow_recovery=options.overflow_recovery,
                    keep_tool_context_turns=options.keep_tool_context_turns,
                    omitted=omitted,
                ),
            )

        rows, omitted, summary = self._request_rows(key, route, options)
        try:
            prepared = prepare(rows, omitted)
        except OmittedTurnsKept:  # a window that was too small: never expected, still correct
            full, summary = self.history(key)
            prepared = prepare(full, None)
        if prepared.events:
            self._notify(key, prepared.events)
        return PreparedRequest(
            provider=route.name,
            model=route.model,
            body=format_body(route.kind, prepared.rows, route.model, swept=True),
            estimated_tokens=prepared.estimated_tokens,
            budget=prepared.budget,
            context_window=prepared.context_window,
            trimmed=prepared.trimmed,
            collapsed_tool_rows=prepared.collapsed_tool_rows,
            collapsed_turns=prepared.collapsed_turns,
        )

    def save_summary(self, key: Key, summary: str, covers_through_id: int | None = None) -> Summary:
        with self._lock:
            stored = StoredSummary(summary, self._clock(), covers_through_id)
            with self.store.write() as connection:
                replaced = self.store.save_summary(connection, key, stored)
            if replaced:  # the old text is replaced, so it goes like deleted text
                self.store.reset_wal()
            result = _summary(stored)
            assert result is not None
            return result

    def get_summary(self, key: Key) -> Summary | None:
        with self._lock:
            self._retain_for_read(key)
            with self.store.read() as connection:
                return _summary(self.store.summary(connection, key))

    def clear(self, key: Key) -> int:
        with self._lock:
            with self.store.write() as connection:
                deleted = self.store.clear(connection, key)
            self.store.reset_wal()
            return deleted

    def list_conversations(self, workspace: str) -> list[ConversationRecord]:
        with self._lock, self.store.read() as connection:
            return self.store.conversations(connection, workspace)

    def list_workspaces(self) -> list[str]:
        with self._lock, self.store.read() as connection:
            return self.store.workspaces(connection)

    def stats(self) -> DatabaseStats:
        with self._lock, self.store.read() as connection:
            return self.store.stats(connection)

    def retain(self, key: Key, *, dry_run: bool = False) -> RetentionPlan:
        """Storage retention of one conversation now (the CLI's ``prune``). With ``dry_run``,
        the same plan on the same row metadata, and nothing deleted."""
        with self._lock:
            now = self._clock()
            if not dry_run:
                with self.store.write() as connection:
                    plan = self._retain_in(
                        connection, key, now, self.store.tail_totals(connection, key)
                    )
                self._after_delete(key, plan)
                return plan
            with self.store.read() as connection:
                summary = self.store.summary(connection, key)
                plan = plan_retention(self.store.row_meta(connection, key), self.settings, now)
            expired = (
                summary is not None
                and self.settings.enable_auto_pruning
                and summary_expired(summary.updated_at, self.settings, now)
            )
            return attrs.evolve(plan, deleted_summary=expired)

    def import_conversation(
        self, key: Key, messages: Sequence[Message], summary: ImportedSummary | None = None
    ) -> ImportResult:
        """Restore exported messages in one write transaction. Messages the conversation already
        holds are skipped (policy.imports); the rest go through the recording rules of ``append``
        but are not cut again (they were when first recorded). Retention is left to the next
        read or write, which applies the settings of whoever uses the conversation."""
        with self._lock:
            result, replaced = self._import_in(key, messages, summary)
            if replaced:
                self.store.reset_wal()
            return result

    def _import_in(
        self, key: Key, messages: Sequence[Message], summary: ImportedSummary | None
    ) -> tuple[ImportResult, bool]:
        """``import_conversation`` in one write transaction: its result, and whether it replaced
        a stored summary."""
        with self.store.write() as connection:
            totals = self.store.tail_totals(connection, key)
            match = match_stored(
                self.store.rows_from(connection, key, 0) if totals else [], messages
            )
            new = [
                m if m.timestamp is not None else attrs.evolve(m, timestamp=self._clock())
                for m in messages[match.start :]
            ]
            inserted: list[StoredMessage] = []
            if new:
                # An import is not activity: the conversation was last active at its newest row.
                newest = max(m.timestamp or 0 for m in new)
                try:
                    inserted, _ = self._record_in(
                        connection,
                        key,
                        totals,
                        new,
                        max_tool_result_chars=0,
                        now=max(newest, totals.last_activity if totals else 0),
                    )
                except InvalidParams as exc:  # name the row among ``messages``, not ``new``
                    index, _, rest = exc.field.removeprefix("messages[").partition("]")
                    raise InvalidParams(
                        f"messages[{int(index) + match.start}]{rest}", exc.why
                    ) from None
            saved = replaced = False
            current = self.store.summary(connection, key)
            if summary is not None and (current is None or current.updated_at < summary.updated_at):
                through = covered_id(summary.covers_messages, match, inserted)
                stored = StoredSummary(summary.summary, summary.updated_at, through)
                replaced = self.store.save_summary(connection, key, stored)
                saved = True
            return ImportResult(tuple(inserted), match.start, saved), replaced
