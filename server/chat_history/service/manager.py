"""ChatHistoryManager: the service API every handler (and the CLI) calls. It composes the pure
policy with the store: one transaction per operation (``store.Transaction``), retention on every
read and write (``storage_retention``), and the ``chatHistory/trimmed`` events to send. No pygls
and no SQL here.

Every public method takes a conversation ``Key`` (or a workspace) and plain model values, and
raises ``StorageError`` when the database cannot be opened, read or written (then nothing
changed) and ``InvalidParams`` for input the recording rules refuse."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Expected, Key, Message, PruneReport, StoredMessage, Summary, Trimmed
from chat_history.policy.calibration import Calibration
from chat_history.policy.imports import covered_id, match_stored
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import RetentionPlan
from chat_history.policy.search.query import parse_query
from chat_history.policy.search.rank import SearchHit, SearchScope, rank
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user
from chat_history.service import conversations, replies, workspaces
from chat_history.service.conversations import (
    ConversationInfo,
    ConversationPage,
    ConversationUpdate,
    DeleteTurnsResult,
    MessageEdit,
    TruncateResult,
)
from chat_history.service.storage_retention import StorageRetention
from chat_history.settings import Settings, default_settings
from chat_history.store import (
    ConversationTotals,
    DatabaseStats,
    HistoryStore,
    Reading,
    Store,
    Transaction,
    open_store,
)
from chat_history.store.reply_section import Replies
from chat_history.store.seam import write_retried

if TYPE_CHECKING:  # preparation loads every provider: imported when a request needs it
    from chat_history.policy.prepare.request import Prepared
    from chat_history.service.preparation import (
        CompactionProposal,
        PreparedRequest,
        PrepareOptions,
        ProposalMemo,
        ProviderRequest,
    )

#: Receives one request's ``chatHistory/trimmed`` events together (never an empty batch).
Notify = Callable[[Key, Sequence[Trimmed]], None]
T = TypeVar("T")


def now_ms() -> int:
    """The real clock: epoch milliseconds."""
    return time.time_ns() // 1_000_000


@attrs.frozen
class AppendResult:
    """``append``: the rows as stored, and what retention pruned in the same transaction."""

    messages: tuple[StoredMessage, ...]
    pruned: PruneReport | None


@attrs.frozen
class GetResult:
    """``get``: a page of rows in order, the summary, what retention pruned before the read,
    and whether older rows exist."""

    messages: tuple[StoredMessage, ...]
    summary: Summary | None
    pruned: PruneReport | None
    has_more: bool


@attrs.frozen
class SearchResult:
    """``search``: the page of hits, most relevant first then newest, and whether more rows
    matched."""

    hits: tuple[SearchHit, ...]
    has_more: bool


@attrs.frozen
class ImportedSummary:
    """A summary from an export; it covered the first ``covers_messages`` exported messages."""

    summary: str
    updated_at: int
    covers_messages: int | None


@attrs.frozen
class ImportResult:
    """``import_conversation``: the rows inserted, how many were skipped, whether the summary
    was saved."""

    imported: tuple[StoredMessage, ...]
    #: leading messages the conversation already held (policy.imports)
    skipped: int
    summary_saved: bool


class ChatHistoryManager:
    """The service: every operation on the chat history, each one transaction (a failed one
    changes nothing) under one lock, with storage retention applied as the settings say."""

    def __init__(
        self,
        store: HistoryStore,
        settings: Settings | None = None,
        *,
        notify: Notify | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        """Args: the ``store``; the ``settings`` in force (defaults; the server replaces
        ``self.settings`` when the client's settings change); ``notify``, called with each request's
        ``chatHistory/trimmed`` events; ``clock``, epoch milliseconds."""
        self.store = store
        self.settings = settings or default_settings()
        self._notify = notify or (lambda key, events: None)
        self._clock = clock
        self._lock = threading.RLock()
        self._retention = StorageRetention(store, lambda: self.settings, self._notify)
        #: this process as the writer of streaming replies (service.replies)
        self.writer = replies.Writer()
        #: each conversation's last compaction proposal (made with the first ``prepare``)
        self._proposals: ProposalMemo | None = None

    @classmethod
    def open(cls, path: Path, settings: Settings | None = None) -> ChatHistoryManager:
        """A manager over the database file at ``path`` (created on first use), with no
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
        ``database`` when one is named (checked: ``store.database_option``), sending each
        request's ``chatHistory/trimmed`` events to ``notify``: what the server opens."""
        return cls(open_store(folder, database, purge_seconds), notify=notify)

    @property
    def database_path(self) -> Path | str:
        """The database this manager reads and writes: the SQLite file, or the PostgreSQL
        URL."""
        return self.store.path

    def close(self) -> None:
        """Close the database (a pending WAL reset gets its last try); a later call reopens it."""
        self.store.close()

    def rest(self) -> None:
        """The server is at rest (``wire.transport.memory``): the cache keeps only its bound at rest
        (``conversation_cache.REST_BYTES``), so a sweep over many conversations does not stay
        resident while the conversations in use stay cached."""
        with self._lock:
            self.store.cache.shrink()

    # -- the service API -------------------------------------------------------------------

    def append(self, key: Key, messages: Sequence[Message]) -> AppendResult:
        """Record ``messages`` at the end of the conversation (created on first append) by the
        recording rules, then apply retention in the same write transaction.

        Returns the stored rows (ids, turns, tokens, timestamps) and what retention pruned.
        Raises InvalidParams (a tool row answering no pending call, ...), StorageError."""
        with self._lock:
            now = self._clock()

            def record(tx: Transaction) -> tuple[list[StoredMessage], RetentionPlan]:
                stored, totals = self._record_in(
                    tx,
                    key,
                    tx.totals(key),
                    messages,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                    now=now,
                )
                return stored, self._retention.apply(tx, key, now, totals)

            stored, plan = self._write((key,), record)
            self._retention.finish(key, plan)
            return AppendResult(tuple(stored), plan.report)

    def get(self, key: Key, limit: int | None = None, before_id: int | None = None) -> GetResult:
        """The conversation's rows after retention, in order: those before ``before_id`` (every
        row when None), only the newest ``limit`` of them when given; with its summary.

        Returns rows, summary, what retention pruned and whether older rows exist.
        Raises StorageError."""
        with self._lock:
            return self._retained_read(
                key, lambda tx, pruned: self._read_page(tx, key, limit, before_id, pruned)
            )

    def history(self, key: Key) -> tuple[list[StoredMessage], Summary | None]:
        """The whole history after retention and its summary (format, prepare's fallback, CLI).
        Raises StorageError."""
        with self._lock:
            self._retention.before_read(key, self._clock())
            with self.store.read() as tx:
                return tx.all_rows(key), tx.summary(key)

    def format(
        self,
        key: Key,
        provider: str | None = None,
        model: str | None = None,
    ) -> ProviderRequest:
        """The whole history after retention as the body of ``provider`` (the active one when
        None) for ``model``.
        Raises InvalidParams (an unknown provider), StorageError."""
        from chat_history.policy.budget import resolve_route
        from chat_history.providers import format_body
        from chat_history.service.preparation import ProviderRequest

        route = resolve_route(provider or self.settings.active_provider, model, self.settings)
        rows, _ = self.history(key)
        breakpoints = self.settings.context.prompt_cache == "auto"
        return ProviderRequest(
            provider=route.name,
            model=route.model,
            body=format_body(route.kind, rows, route.model, breakpoints=breakpoints),
            cache_key=self.cache_key(key),
        )

    def cache_key(self, key: Key) -> str:
        """The ``cacheKey`` of every request of ``key``'s conversation (providers.cache_points).
        Raises StorageError."""
        from chat_history.providers.cache_points import cache_key
        from chat_history.store.keys import CACHE

        return cache_key(self.store.secret(CACHE), key)

    def prepare(self, key: Key, options: PrepareOptions) -> PreparedRequest:
        """The request to send now: the history after retention, the summary standing in for
        the turns it covers, fitted to the route's budget (turn limit, token budget, tool-context
        collapse, recovery) with estimates calibrated by the route's usage reports, and
        formatted for the provider; with a compaction proposal when the history nears the
        budget. Reads only what it can send when the recorded turn figures allow
        (``policy.prepare.readplan``). Sends the request's ``chatHistory/trimmed`` events.

        Returns the body with its estimates, budget, window, what was trimmed, collapsed or
        compacted, and the proposal. Raises InvalidParams (an unknown provider),
        ContextOverflow, StorageError."""
        from chat_history.policy.budget import resolve_route
        from chat_history.service import preparation

        route = resolve_route(
            options.provider or self.settings.active_provider, options.model, self.settings
        )
        with self._lock:
            if self._proposals is None:
                self._proposals = preparation.ProposalMemo()
            memo = self._proposals
            cache_key = self.cache_key(key)

            def prepare_in(tx: Reading) -> tuple[Prepared, CompactionProposal | None]:
                replies.check_continue(tx, key, options.continue_id)
                return preparation.prepare_in(
                    tx, self.settings, key, route, options, cache_key=cache_key, memo=memo
                )

            prepared, compaction = self._retained_read(key, lambda tx, _: prepare_in(tx))
        if prepared.events:
            self._notify(key, prepared.events)
        return preparation.prepared_request(
            route,
            prepared,
            compaction,
            cache_key=cache_key,
            breakpoints=self.settings.context.prompt_cache == "auto",
            continuing=options.continue_id is not None,
        )

    def report_usage(
        self, provider: str | None, model: str | None, estimated_tokens: int, prompt_tokens: int
    ) -> Calibration:
        """Record ``prompt_tokens / estimated_tokens`` (clipped) for the calibration of
        ``provider`` (kind or alias; None: the active provider) and ``model``, shared by every
        conversation and process. Returns the new calibration of that key.
        Raises InvalidParams (a figure below 1, an unknown provider), StorageError."""
        from chat_history.policy.calibration import (
            calibration_of,
            check_usage,
            usage_key,
            usage_ratio,
        )

        estimated, prompt = check_usage(estimated_tokens, prompt_tokens)
        with self._lock:
            key = usage_key(provider, model, self.settings)
            # Shared by every conversation: the write names none (it takes the whole database).
            ratios = self._write(
                (),
                lambda tx: tx.add_calibration_ratio(
                    key.kind, key.model, usage_ratio(estimated, prompt)
                ),
            )
            return calibration_of(ratios)

    def save_summary(self, key: Key, summary: str, covers_through_id: int | None = None) -> Summary:
        """Save (or replace) the conversation's summary, stamped now; ``covers_through_id`` is
        the newest row it covers and must be a row of the conversation. Returns the saved
        summary. Raises InvalidParams ``covers_through_id`` (then nothing changed), StorageError."""
        with self._lock:
            saved = Summary(
                summary=summary, updated_at=self._clock(), covers_through_id=covers_through_id
            )

            def save(tx: Transaction) -> bool:
                if covers_through_id is not None and not tx.has_row(key, covers_through_id):
                    raise InvalidParams(
                        "covers_through_id",
                        "is not a row of this conversation",
                    )
                return conversations.save_summary(tx, key, saved)

            self._write((key,), save)  # a replaced summary is purged at the commit
            return saved

    def get_summary(self, key: Key) -> Summary | None:
        """The conversation's summary after retention (an expired one is deleted), or None.
        Raises StorageError."""
        with self._lock:
            self._retention.before_read(key, self._clock())
            with self.store.read() as tx:
                return tx.summary(key)

    def clear(self, key: Key) -> int:
        """Delete the conversation: its rows, summary and totals. Returns the rows deleted.
        Raises StorageError."""
        with self._lock:
            return self._write((key,), lambda tx: tx.clear(key))

    # -- version 2: conversations and edits (service.conversations) ------------------------------
    # One transaction each, no retention and no chatHistory/trimmed (the client asked for this
    # change); the text the ones that delete or replace text remove is purged at their commit
    # (store.seam: Transaction.removed_text).

    def conversation(self, key: Key) -> ConversationInfo:
        """The conversation's ConversationInfo (that of an empty one when it does not exist)."""
        with self._lock, self.store.snapshot() as tx:
            return conversations.info(tx, key)

    def list_conversations_page(
        self, workspace: str | None, limit: int | None, cursor: str | None
    ) -> ConversationPage:
        """The conversations of ``workspace`` (None: every workspace) after the position
        ``cursor`` names, newest activity first, at most ``limit`` (None: all) and the next
        cursor. Raises InvalidParams ``cursor`` for a cursor this database did not hand out,
        StorageError."""
        with self._lock, self.store.snapshot() as tx:
            return conversations.list_page(tx, workspace, limit, cursor)

    def update_conversation(self, key: Key, change: ConversationUpdate) -> ConversationInfo:
        """Set the title and/or replace the metadata (protocol.md ``updateConversation``)."""
        with self._lock:
            return self._write(
                (key,), lambda tx: conversations.update(tx, key, change, self._clock())
            )

    def truncate(self, key: Key, from_id: int, expected: Expected = None) -> TruncateResult:
        """Delete row ``from_id`` and every later row (and a summary covering them), only while
        the newest row is the ``expected`` one (when given).
        Raises InvalidParams ``from_id``, ConversationChanged, StorageError."""
        with self._lock:
            return self._write(
                (key,), lambda tx: conversations.truncate(tx, key, from_id, self._clock(), expected)
            )

    def delete_turns(
        self, key: Key, turns: Sequence[int], expected: Expected = None
    ) -> DeleteTurnsResult:
        """Delete every row of the named turns, only while the newest row is the ``expected``
        one (when given). Raises InvalidParams ``turns``/``turns[i]``, ConversationChanged."""
        from chat_history.policy.rewind import check_turns

        check_turns(turns)
        with self._lock:
            return self._write(
                (key,),
                lambda tx: conversations.delete_turns(tx, key, turns, self._clock(), expected),
            )

    def edit_message(
        self, key: Key, row_id: int, edit: MessageEdit, expected: Expected = None
    ) -> StoredMessage:
        """Replace a row's content, attachments and/or metadata in place, only while the newest
        row is the ``expected`` one (when given); returns the row as now stored.
        Raises InvalidParams ``id``/``content``, ConversationChanged, StorageError."""
        with self._lock:
            return self._write(
                (key,),
                lambda tx: conversations.edit_message(
                    tx,
                    key,
                    row_id,
                    edit,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                    now=self._clock(),
                    expected=expected,
                ),
            )

    def fork(self, key: Key, target: Key, through_id: int | None = None) -> ConversationInfo:
        """Copy the conversation through ``through_id`` (default: all) into ``target``.
        Raises InvalidParams ``new_conversation_id``/``conversation_id``/``through_id``."""
        # It names no conversation: the copy takes a block of consecutive row ids, which only a
        # write of the whole database may (store.postgres.dialect).
        with self._lock:
            return self._write(
                (), lambda tx: conversations.fork(tx, key, target, through_id, self._clock())
            )

    def delete_summary(self, key: Key) -> bool:
        """Delete the summary; returns whether there was one. Raises StorageError."""
        with self._lock:
            return self._write(
                (key,), lambda tx: conversations.delete_summary(tx, key, self._clock())
            )

    # -- version 4: replies in flight (service.replies) -------------------------------------

    def begin_reply(self, key: Key, options: replies.ReplyBegin) -> StoredMessage:
        """A streaming assistant row (or the interrupted newest row again, ``continue_id``).
        Raises ReplyInProgress (1004), ConversationChanged, InvalidParams, StorageError."""
        with self._lock:
            now = self._clock()

            def record(tx: Transaction, message: Message) -> StoredMessage:
                stored, _ = self._record_in(
                    tx, key, tx.totals(key), [message], max_tool_result_chars=0, now=now
                )
                return stored[0]

            row = self._write(
                (key,), lambda tx: replies.begin(tx, key, options, self.writer.name, now, record)
            )
            self.writer.started(key, row.id)
            return row

    def update_reply(self, key: Key, row_id: int, change: replies.ReplyChange) -> int:
        """Apply an update to this process's streaming row; returns its length (code points).
        Raises InvalidParams ``id``/``content_delta``, StorageError."""
        with self._lock:
            self.writer.admit(row_id)
            now = self._clock()
            return self._write(
                (key,),
                lambda tx: replies.update(tx, key, row_id, change, self.writer.name, now),
            )

    def end_reply(
        self, key: Key, row_id: int, status: replies.EndStatus, change: replies.ReplyChange
    ) -> AppendResult:
        """End this process's streaming row: complete or interrupted (then retention runs as
        after an append), or discarded for good. Raises InvalidParams ``id``, StorageError."""
        with self._lock:
            now = self._clock()

            def finish(tx: Transaction) -> tuple[StoredMessage | None, RetentionPlan]:
                row = replies.end(tx, key, row_id, status, change, self.writer.name, now)
                return row, self._retention.apply(tx, key, now, tx.totals(key))

            row, plan = self._write((key,), finish)
            self.writer.ended(key)  # a discard's text is purged at its commit
            self._retention.finish(key, plan)
            return AppendResult((row,) if row is not None else (), plan.report)

    def tend_replies(self) -> int:
        """Renew this process's leases and end every expired one as interrupted (a server runs
        it every ``replies.RENEW_MS``); returns how many it interrupted."""
        with self._lock:
            now = self._clock()
            held = list(self.writer.held.items())
            if held:
                self._write(
                    [k for k, _ in held],
                    lambda tx: Replies(tx).renew(
                        self.writer.name, [i for _, i in held], now + replies.LEASE_MS
                    ),
                )
            with self.store.read() as reading:
                due = replies.expired(reading, now)
            return self._interrupt(due, now, expired_only=True)

    def release_replies(self) -> int:
        """This process's streaming rows interrupted at once (its exit); returns how many."""
        with self._lock:
            with self.store.read() as reading:
                mine = replies.held_by(reading, self.writer.name)
            return self._interrupt(mine, self._clock(), expired_only=False)

    def _interrupt(self, rows: Sequence[tuple[Key, int]], now: int, *, expired_only: bool) -> int:
        """End each of ``rows`` as interrupted (with ``expired_only``: if its lease is still
        expired), each in its own write; returns how many ended."""
        done = 0
        for key, row_id in rows:

            def interrupt(tx: Transaction, key: Key = key, row_id: int = row_id) -> object:
                if expired_only:
                    return replies.expire_if_due(tx, key, row_id, now)
                return replies.end(tx, key, row_id, "interrupted", replies.ReplyChange(), None, now)

            row = self._write((key,), interrupt)
            self.writer.ended(key)
            done += row is not None
        return done

    # -- version 3: workspace identity (service.workspaces) ----------------------------------------

    def open_identity(self, identity: workspaces.Identity, machine: str) -> list[str]:
        """Before a session's first request under ``identity``: re-key other spellings and a
        moved folder's history, record the fingerprint (one transaction). Returns what moved."""
        with self._lock:  # it re-keys across workspaces: the whole database
            with self.store.snapshot() as reading:
                if not workspaces.needs_opening(reading, identity):
                    return []
            return self._write(
                (), lambda tx: workspaces.open_identity(tx, identity, machine, self._clock())
            )

    def has_history(self, workspace: str) -> bool:
        """Whether ``workspace`` holds any conversation."""
        with self._lock, self.store.snapshot() as tx:
            return bool(tx.conversation_ids(workspace))

    def recall_workspace(self, identity: workspaces.Identity, machine: str) -> str:
        """The workspace whose history a read-only reader of ``identity`` sees (the MCP server's
        scope): the identity, else its moved folder's history; nothing is moved or recorded."""
        with self._lock, self.store.snapshot() as tx:
            return workspaces.recall_workspace(tx, identity, machine, self._clock())

    def move_workspace(self, source: str, target: str) -> int:
        """Re-key every conversation of ``source`` to ``target`` (one transaction); returns how
        many. Raises InvalidParams ``to`` when a conversation id is in both, StorageError."""
        with self._lock:  # every conversation of two workspaces: the whole database
            return self._write((), lambda tx: workspaces.move_workspace(tx, source, target))

    def purge(self) -> bool:
        """The engine's purge of deleted text, now (the CLI's ``purge``)."""
        return self.store.purge_now()

    def workspace_infos(self, machine: str) -> list[workspaces.WorkspaceInfo]:
        """``listWorkspaces``: every workspace with conversations, newest activity first."""
        with self._lock, self.store.snapshot() as tx:
            return workspaces.list_workspaces(tx, machine)

    def stats(self) -> DatabaseStats:
        """Counts (a conversation counts as the listing shows it) and the oldest/newest
        timestamps of the whole database. Raises StorageError."""
        with self._lock, self.store.read() as tx:
            return tx.stats()

    def retain(self, key: Key, *, dry_run: bool = False) -> RetentionPlan:
        """Storage retention of one conversation now (the CLI's ``prune``). With ``dry_run``,
        the same plan on the same row metadata, and nothing deleted.

        Returns the plan (ids deleted, report, events, whether the summary expired).
        Raises StorageError."""
        with self._lock:
            now = self._clock()
            if dry_run:
                return self._retention.dry_run(key, now)
            return self._retention.run(key, now)

    def search(self, scope: SearchScope, query: str, limit: int) -> SearchResult:
        """The ``limit`` rows in ``scope`` that best match ``query`` (policy.search), with
        snippets and highlights, and whether more matched. Indexes the rows written since the
        last search first (store.search_index), and runs retention for every conversation with
        hits before answering, so only rows a ``get`` would return now are found.
        Raises StorageError."""
        parsed = parse_query(query)
        if not parsed.searchable or not scope.roles:
            return SearchResult((), False)
        with self._lock:
            now = self._clock()
            with self.store.read() as reading:
                backlog = reading.search_backlog()
            if backlog:
                self._write((), lambda tx: tx.index_for_search())
            checked: set[Key] = set()
            while True:  # until every conversation on the page has had its retention
                with self.store.snapshot() as reading:
                    rows = reading.search_best(scope, parsed, limit + 1)
                    keys = dict.fromkeys(Key(row.workspace, row.conversation) for row in rows)
                    due = [
                        key
                        for key in keys
                        if key not in checked and not self._retention.nothing_due(reading, key, now)
                    ]
                    checked.update(keys)
                if not due:
                    break
                for key in due:
                    self._retention.run(key, now)
            hits, more = rank(rows, parsed, limit)
            return SearchResult(tuple(hits), more)

    def import_conversation(
        self, key: Key, messages: Sequence[Message], summary: ImportedSummary | None = None
    ) -> ImportResult:
        """Restore exported messages in one write transaction. Messages the conversation already
        holds are skipped (policy.imports); the rest go through the recording rules of ``append``
        but are not cut again (they were when first recorded). Retention is left to the next
        read or write, which applies the settings of whoever uses the conversation.

        Returns the rows inserted, the leading messages skipped and whether ``summary`` was
        saved (only when newer than the stored one). Raises InvalidParams naming the row among
        ``messages``, StorageError."""
        with self._lock:
            return self._import_in(key, messages, summary)

    # -- steps ------------------------------------------------------------------------------

    def _write(self, keys: Sequence[Key], body: Callable[[Transaction], T]) -> T:
        """``body`` in one write transaction that changes the conversations ``keys`` (none: any,
        under a lock of the whole database), run again when the database aborted it to break a
        deadlock (``store.seam.write_retried``)."""
        return write_retried(self.store, keys, body)

    def _retained_read(self, key: Key, read: Callable[[Reading, PruneReport | None], T]) -> T:
        """``read`` in a snapshot after retention: the snapshot that checked nothing is due
        when so (the common case, one read transaction), else a new one after retention ran."""
        now = self._clock()
        with self.store.snapshot() as tx:
            if self._retention.nothing_due(tx, key, now):
                return read(tx, None)
        pruned = self._retention.run(key, now).report
        with self.store.snapshot() as tx:
            return read(tx, pruned)

    def _read_page(
        self,
        tx: Reading,
        key: Key,
        limit: int | None,
        before_id: int | None,
        pruned: PruneReport | None,
    ) -> GetResult:
        if limit is None:
            rows = tx.all_rows(key)
            if before_id is not None:
                rows = [row for row in rows if row.id < before_id]
            has_more = False
        else:
            rows, has_more = tx.page(key, limit, before_id)
        return GetResult(tuple(rows), tx.summary(key), pruned, has_more)

    def _record_in(
        self,
        tx: Transaction,
        key: Key,
        totals: ConversationTotals | None,
        messages: Sequence[Message],
        *,
        max_tool_result_chars: int,
        now: int,
        first_index: int = 0,
    ) -> tuple[list[StoredMessage], ConversationTotals]:
        """The recording rules (turns, tool rows answering calls) and the insert; returns the
        stored rows and the conversation's new totals. Rows without a timestamp get ``now``."""
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
            key, [(p.message, p.turn, stored_tokens(p.message)) for p in planned], totals, now
        )
        self._record_completed_turns(tx, key, [*current, *stored])
        return stored, after

    def _record_completed_turns(
        self, tx: Transaction, key: Key, rows: Sequence[StoredMessage]
    ) -> None:
        """The figures of every turn in ``rows`` (the current turn and the rows just written)
        that a later turn now follows: what ``prepare`` counts for a turn it does not read."""
        if not rows or rows[0].turn == rows[-1].turn:
            return
        from chat_history.policy.prepare.collapse import turn_figures

        completed: list[tuple[int, tuple[int, ...]]] = []
        start = 0
        for index in range(1, len(rows)):
            if rows[index].turn != rows[start].turn:
                figures = turn_figures(rows[start:index])
                if figures.turns:
                    completed.append((rows[start].turn, figures.as_tuple()))
                start = index
        tx.add_turn_figures(key, completed)

    def _import_in(
        self, key: Key, messages: Sequence[Message], summary: ImportedSummary | None
    ) -> ImportResult:
        """``import_conversation`` in one write transaction (a replaced summary is purged at
        its commit)."""
        return self._write((key,), lambda tx: self._import_with(tx, key, messages, summary))

    def _import_with(
        self,
        tx: Transaction,
        key: Key,
        messages: Sequence[Message],
        summary: ImportedSummary | None,
    ) -> ImportResult:
        totals = tx.totals(key)
        match = match_stored(tx.rows_from(key, 0) if totals else [], messages)
        new = [
            m if m.timestamp is not None else attrs.evolve(m, timestamp=self._clock())
            for m in messages[match.start :]
        ]
        inserted = self._import_rows(tx, key, totals, new, match.start) if new else []
        saved = False
        current = tx.summary(key)
        if summary is not None and (current is None or current.updated_at < summary.updated_at):
            through = covered_id(summary.covers_messages, match, inserted)
            tx.save_summary(
                key,
                Summary(
                    summary=summary.summary,
                    updated_at=summary.updated_at,
                    covers_through_id=through,
                ),
            )
            saved = True
        return ImportResult(tuple(inserted), match.start, saved)

    def _import_rows(
        self,
        tx: Transaction,
        key: Key,
        totals: ConversationTotals | None,
        new: Sequence[Message],
        skipped: int,
    ) -> list[StoredMessage]:
        """Record the ``new`` messages of an import (those after the ``skipped`` ones)."""
        # An import is not activity: the conversation was last active at its newest row.
        newest = max(m.timestamp or 0 for m in new)
        inserted, _ = self._record_in(
            tx,
            key,
            totals,
            new,
            max_tool_result_chars=0,
            now=max(newest, totals.last_activity if totals else 0),
            first_index=skipped,
        )
        return inserted
