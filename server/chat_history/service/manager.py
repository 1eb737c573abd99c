"""ChatHistoryManager, the core every operation runs on: one store under one lock, the settings
an operation runs under, the one write path (``write``), the read after retention
(``retained_read``) and the recording rules' insert (``record_in``). The operations themselves
live in one module per family, as ``wire/methods`` groups the methods (``history``,
``conversations``, ``edits``, ``replies``, ``workspaces``, ``search``, ``usage``,
``import_writes``): each a function taking the manager first, one transaction per operation,
under its lock. No pygls and no SQL here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar, cast, runtime_checkable

import attrs

from chat_history.model import Follow, Key, Message, PruneReport, StoredMessage, Trimmed
from chat_history.policy.recording import plan_append
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user
from chat_history.service.storage_retention import StorageRetention
from chat_history.service.tree_steps import record_completed_turns
from chat_history.settings import Settings, default_settings
from chat_history.store import (
    ConversationTotals,
    HistoryStore,
    Reading,
    Store,
    Transaction,
    open_store,
)
from chat_history.store.seam import write_retried

#: Receives one request's ``chatHistory/trimmed`` events together (never an empty batch).
Notify = Callable[[Key, Sequence[Trimmed]], None]
T = TypeVar("T")


@runtime_checkable
class KeptAtRest(Protocol):
    """State ``kept`` by a family that lets go of what it holds when the server is at rest
    (e.g. prepare's bodies: ``service.body_memo``)."""

    def at_rest(self) -> None: ...


def now_ms() -> int:
    """The real clock: epoch milliseconds."""
    return time.time_ns() // 1_000_000


def _or_defaults(settings: Settings | None) -> Settings:
    return settings or default_settings()


def _or_silent(notify: Notify | None) -> Notify:
    return notify or (lambda key, events: None)


@attrs.frozen(eq=False)
class ChatHistoryManager:
    """The core of the service. Every operation holds ``lock`` (so operations run one at a
    time), is one transaction (a failed one changes nothing: ``StorageError``, or
    ``InvalidParams`` for input the rules refuse) and applies retention as ``settings`` say.

    Args: ``store``, the database; ``settings``, what operations run under (defaults);
    ``notify``, called with each operation's ``chatHistory/trimmed`` events; ``clock``, epoch
    milliseconds. The settings are a value: ``under`` gives the same manager under others."""

    store: HistoryStore
    settings: Settings = attrs.field(default=None, converter=_or_defaults)
    notify: Notify = attrs.field(default=None, converter=_or_silent, kw_only=True)
    clock: Callable[[], int] = attrs.field(default=now_ms, kw_only=True)
    #: held by every operation; re-entrant, so that one operation may run another
    lock: threading.RLock = attrs.field(factory=threading.RLock, kw_only=True, repr=False)
    #: what ``kept`` made, shared by every ``under`` of this manager
    _kept: dict[Callable[[], object], object] = attrs.field(factory=dict, kw_only=True, repr=False)
    #: the last ``under`` made, as (settings, manager), shared by every ``under`` of this one
    _last_under: list[tuple[Settings, ChatHistoryManager]] = attrs.field(
        factory=list, kw_only=True, repr=False
    )
    #: retention under ``settings`` (``service.storage_retention``)
    retention: StorageRetention = attrs.field(init=False, repr=False)

    @retention.default
    def _retention_under_settings(self) -> StorageRetention:
        return StorageRetention(self.store, self.settings, self.notify)

    @classmethod
    def open(cls, path: Path, settings: Settings | None = None) -> ChatHistoryManager:
        """A manager over the SQLite file at ``path`` (created on first use), with no
        notifications and the real clock: what the CLI and scripts use."""
        return cls(Store(path.parent, file_name=path.name), settings)

    @classmethod
    def on_database(
        cls, url: str, settings: Settings | None = None, *, purge_seconds: float | None = None
    ) -> ChatHistoryManager:
        """A manager over the PostgreSQL database at ``url`` (checked: ``store.database_option``),
        with no notifications and the real clock: what the CLI's ``--database`` opens."""
        return cls(open_store(Path(), url, purge_seconds), settings)

    @classmethod
    def in_folder(
        cls,
        folder: Path,
        *,
        notify: Notify | None = None,
        database: str | None = None,
        purge_seconds: float | None = None,
    ) -> ChatHistoryManager:
        """A manager over the database in ``folder`` (created on first use), or the PostgreSQL
        ``database`` when one is named, sending each request's ``chatHistory/trimmed`` events to
        ``notify``: what the server opens (each request then runs ``under`` its settings)."""
        return cls(open_store(folder, database, purge_seconds), notify=notify)

    def under(self, settings: Settings) -> ChatHistoryManager:
        """This manager under ``settings`` (one request's): the same store, lock and kept
        state; only what the settings rule (retention, cuts, routes) differs. Requests under
        the same settings (the same value) share one: it is made once, not per request."""
        if settings is self.settings:
            return self
        last = self._last_under
        if last and last[0][0] is settings:
            return last[0][1]
        made = attrs.evolve(self, settings=settings)
        last[:] = [(settings, made)]
        return made

    @property
    def database_path(self) -> Path | str:
        """The database: the SQLite file, or the PostgreSQL URL."""
        return self.store.path

    def close(self) -> None:
        """Close the database (a pending WAL reset gets its last try); a later call reopens it."""
        self.store.close()

    def rest(self) -> None:
        """The server is at rest (``wire.transport.memory``): the cache keeps only its bound at rest
        (``conversation_cache.REST_BYTES``), so a sweep over many conversations does not stay
        resident while the conversations in use stay cached; what ``kept`` made that holds
        rows for speed only (``KeptAtRest``) lets go of them."""
        with self.lock:
            self.store.cache.shrink()
            for state in self._kept.values():
                if isinstance(state, KeptAtRest):
                    state.at_rest()

    def kept(self, make: Callable[[], T]) -> T:
        """The one ``make()`` of this manager (and of every ``under`` of it): a family's state
        across operations, e.g. the replies' writer, prepare's proposal memo."""
        with self.lock:
            if make not in self._kept:
                self._kept[make] = make()
            return cast(T, self._kept[make])

    def write(self, keys: Sequence[Key], body: Callable[[Transaction], T]) -> T:
        """``body`` in one write transaction that changes the conversations ``keys`` (none: any,
        under a lock of the whole database), run again when the database aborted it to break a
        deadlock (``store.seam.write_retried``)."""
        return write_retried(self.store, keys, body)

    def retained_read(self, key: Key, read: Callable[[Reading, PruneReport | None], T]) -> T:
        """``read`` in a snapshot after retention, with what retention pruned: the snapshot that
        found nothing due when so (the common case, one read transaction), else a new one
        after retention ran."""
        now = self.clock()
        with self.store.snapshot() as tx:
            if self.retention.nothing_due(tx, key, now):
                return read(tx, None)
        pruned = self.retention.run(key, now).report
        with self.store.snapshot() as tx:
            return read(tx, pruned)


def record_in(
    tx: Transaction,
    key: Key,
    totals: ConversationTotals | None,
    messages: Sequence[Message],
    *,
    max_tool_result_chars: int,
    now: int,
    first_index: int = 0,
    follow: Follow | None = None,
) -> tuple[list[StoredMessage], ConversationTotals]:
    """The recording rules (turns, tool rows answering calls) and the insert, in ``tx``; returns
    the stored rows and the conversation's new totals. Rows without a timestamp get ``now``; the
    first follows the active leaf, which ``follow`` made the row it names (``tree_steps``)."""
    # The current turn's rows matter only to a tool row (its pending calls) or to a new
    # turn (which completes the current one, whose figures are then recorded).
    current: list[StoredMessage] = []
    if totals is not None and any(m.role == "tool" or is_real_user(m) for m in messages):
        current = tx.current_turn(key, totals)
    planned = plan_append(
        last_turn=totals.last_turn if totals else 0,
        current_turn_rows=current,
        messages=messages,
        max_tool_result_chars=max_tool_result_chars,
        first_index=first_index,
    )
    stored, after = tx.insert(
        key, [(p.message, p.turn, stored_tokens(p.message)) for p in planned], totals, now, follow
    )
    record_completed_turns(tx, key, [*current, *stored])
    return stored, after
