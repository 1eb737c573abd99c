"""ChatHistoryManager: the service API every handler (and the CLI) calls. It composes the pure
policy with the store: one transaction per operation, retention on every read and write, and the
``chatHistory/trimmed`` events to send. No pygls here."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence

import attrs

from chat_history.model import Message, PruneReport, StoredMessage, Summary, ToolSpec, Trimmed
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import (
    RetentionPlan,
    needs_retention,
    plan_retention,
    summary_expired,
)
from chat_history.policy.tokens import stored_tokens
from chat_history.settings import Settings, default_settings
from chat_history.store import Key, Store
from chat_history.store.db import ConversationRecord, StoredSummary

Notify = Callable[[Key, Trimmed], None]


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
        self._notify = notify or (lambda key, event: None)
        self._clock = clock
        self._lock = threading.RLock()

    # -- retention -------------------------------------------------------------------------

    def _retain_in(self, connection: sqlite3.Connection, key: Key, now: int) -> RetentionPlan:
        """Retention inside the caller's write transaction."""
        settings = self.settings
        summary = self.store.summary(connection, key)
        summary_gone = (
            summary is not None
            and settings.enable_auto_pruning
            and summary_expired(summary.updated_at, settings, now)
        )
        if summary_gone:
            self.store.delete_summary(connection, key)
        totals = self.store.totals(connection, key)
        plan = RetentionPlan(frozenset(), None, (), deleted_summary=summary_gone)
        if totals is None or not needs_retention(
            settings=settings,
            message_count=totals.message_count,
            tokens=totals.tokens,
            oldest_timestamp=totals.oldest_timestamp,
            now_ms=now,
        ):
            return plan
        plan = attrs.evolve(
            plan_retention(self.store.row_meta(connection, key), settings, now),
            deleted_summary=summary_gone,
        )
        if plan.delete_ids:
            self.store.delete_rows(connection, key, plan.delete_ids)
        return plan

    def _after_delete(self, key: Key, plan: RetentionPlan) -> None:
        if plan.delete_ids or plan.deleted_summary:
            self.store.reset_wal()
        for event in plan.events:
            self._notify(key, event)

    def _retain_for_read(self, key: Key) -> PruneReport | None:
        now = self._clock()
        settings = self.settings
        if not settings.enable_auto_pruning:
            return None
        with self.store.read() as connection:
            totals = self.store.totals(connection, key)
            summary = self.store.summary(connection, key)
        stale_summary = summary is not None and summary_expired(summary.updated_at, settings, now)
        if not stale_summary and (
            totals is None
            or not needs_retention(
                settings=settings,
                message_count=totals.message_count,
                tokens=totals.tokens,
                oldest_timestamp=totals.oldest_timestamp,
                now_ms=now,
            )
        ):
            return None
        with self.store.write() as connection:
            plan = self._retain_in(connection, key, now)
        self._after_delete(key, plan)
        return plan.report

    # -- the service API -------------------------------------------------------------------

    def append(self, key: Key, messages: Sequence[Message]) -> AppendResult:
        with self._lock:
            now = self._clock()
            stamped = [
                m if m.timestamp is not None else attrs.evolve(m, timestamp=now) for m in messages
            ]
            with self.store.write() as connection:
                totals = self.store.totals(connection, key)
                current = (
                    self.store.rows_from(connection, key, totals.turn_start_id) if totals else []
                )
                planned = plan_append(
                    last_turn=totals.last_turn if totals else 0,
                    current_turn_rows=current,
                    messages=stamped,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                )
                stored = self.store.insert(
                    connection,
                    key,
                    [(p.message, p.turn, stored_tokens(p.message)) for p in planned],
                    totals,
                    now,
                )
                plan = self._retain_in(connection, key, now)
            self._after_delete(key, plan)
            return AppendResult(tuple(stored), plan.report)

    def get(self, key: Key, limit: int | None = None, before_id: int | None = None) -> GetResult:
        with self._lock:
            pruned = self._retain_for_read(key)
            with self.store.read() as connection:
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
        from chat_history.policy.context import prepare_rows
        from chat_history.providers import format_body

        route = resolve_route(
            options.provider or self.settings.active_provider, options.model, self.settings
        )
        rows, summary = self.history(key)
        prepared = prepare_rows(
            rows,
            settings=self.settings.context,
            route=route,
            summary=summary.summary if summary else None,
            tools=options.tools,
            extra_tokens=options.extra_tokens,
            overflow_recovery=options.overflow_recovery,
            keep_tool_context_turns=options.keep_tool_context_turns,
        )
        for event in prepared.events:
            self._notify(key, event)
        return PreparedRequest(
            provider=route.name,
            model=route.model,
            body=format_body(route.kind, prepared.rows, route.model),
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
                self.store.save_summary(connection, key, stored)
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
