"""ChatHistoryManager: the service API every handler (and the CLI) calls. It composes the pure
policy with the store: one transaction per operation (``store.Transaction``), retention on every
read and write (``storage_retention``), and the ``chatHistory/trimmed`` events to send. No pygls
and no SQL here.

Every public method takes a conversation ``Key`` (or a workspace) and plain model values, and
raises ``StorageError`` when the database cannot be opened, read or written (then nothing
changed) and ``InvalidParams`` for input the recording rules refuse."""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import attrs

from chat_history import conversations, workspaces
from chat_history.conversations import (
    ConversationInfo,
    ConversationPage,
    ConversationUpdate,
    DeleteTurnsResult,
    MessageEdit,
    TruncateResult,
)
from chat_history.errors import InvalidParams
from chat_history.model import Key, Message, PruneReport, StoredMessage, Summary, ToolSpec, Trimmed
from chat_history.policy.calibration import Calibration
from chat_history.policy.cursor import CursorPosition
from chat_history.policy.imports import covered_id, match_stored
from chat_history.policy.recording import plan_append
from chat_history.policy.retention import RetentionPlan
from chat_history.policy.search import parse_query
from chat_history.policy.search_rank import SearchHit, SearchScope, rank
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user
from chat_history.settings import Settings, default_settings
from chat_history.storage_retention import StorageRetention
from chat_history.store import (
    ConversationRecord,
    ConversationTotals,
    DatabaseStats,
    HistoryStore,
    Reading,
    Store,
    Transaction,
)

if TYPE_CHECKING:
    from chat_history.policy.budget import Route
    from chat_history.policy.context import OmittedTurns, Prepared, RequestOptions

#: Receives one request's ``chatHistory/trimmed`` events together (never an empty batch).
Notify = Callable[[Key, Sequence[Trimmed]], None]
T = TypeVar("T")
#: What ``prepare`` reads: rows, the turns left unread (None: every row was read), the summary.
RequestRows = tuple[list[StoredMessage], "OmittedTurns | None", Summary | None]


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


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """``format``: the whole history as the provider's body."""

    provider: str
    model: str | None
    body: dict[str, object]


@attrs.frozen(kw_only=True)
class CompactionProposal:
    """``PreparedRequest.compaction``: send ``request`` to the model and save its reply with
    ``save_summary(..., covers_through_id=through_id)``; it then stands in for
    ``covered_turns`` turns. The estimates are of ``request`` (calibrated, and not)."""

    through_id: int
    covered_turns: int
    estimated_tokens: int
    raw_estimated_tokens: int
    request: ProviderRequest


@attrs.frozen(kw_only=True)
class PreparedRequest:
    """``prepare``: the body to send, with what was estimated, trimmed, collapsed and
    compacted, the calibration its estimates used and a compaction proposal (or None).
    ``estimated_tokens`` and the figures of ``trimmed`` are calibrated;
    ``raw_estimated_tokens`` is not (what a client reports back with ``report_usage``)."""

    provider: str
    model: str | None
    body: dict[str, object]
    estimated_tokens: int
    budget: int | None
    context_window: int | None
    trimmed: object | None  # policy.context.RequestTrim
    collapsed_tool_rows: int
    collapsed_turns: int
    compaction: CompactionProposal | None
    compacted_turns: int
    compacted_messages: int
    raw_estimated_tokens: int
    calibration: Calibration


@attrs.frozen(kw_only=True)
class PrepareOptions:
    """What one ``prepare`` asks: the route (None: the active provider, its default model),
    the caller's tools, tokens it will add, overflow recovery, its own keepToolContextTurns."""

    provider: str | None = None
    model: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    extra_tokens: int = 0
    overflow_recovery: bool = False
    keep_tool_context_turns: int | None = None


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

    @classmethod
    def open(cls, path: Path, settings: Settings | None = None) -> ChatHistoryManager:
        """A manager over the database file at ``path`` (created on first use), with no
        notifications and the real clock: what the CLI and scripts use."""
        return cls(Store(path.parent, file_name=path.name), settings)

    @property
    def database_path(self) -> Path | str:
        """The database this manager reads and writes: the SQLite file, or the PostgreSQL
        URL."""
        return self.store.path

    def close(self) -> None:
        """Close the database (a pending WAL reset gets its last try); a later call reopens it."""
        self.store.close()

    # -- the service API -------------------------------------------------------------------

    def append(self, key: Key, messages: Sequence[Message]) -> AppendResult:
        """Record ``messages`` at the end of the conversation (created on first append) by the
        recording rules, then apply retention in the same write transaction.

        Returns the stored rows (ids, turns, tokens, timestamps) and what retention pruned.
        Raises InvalidParams (a tool row answering no pending call, ...), StorageError."""
        with self._lock:
            now = self._clock()
            with self.store.write() as tx:
                stored, totals = self._record_in(
                    tx,
                    key,
                    tx.totals(key),
                    messages,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                    now=now,
                )
                plan = self._retention.apply(tx, key, now, totals)
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
        tools: Sequence[ToolSpec] | None = None,
    ) -> ProviderRequest:
        """The whole history after retention as the body of ``provider`` (the active one when
        None) for ``model``; ``tools`` is accepted for symmetry with ``prepare``.
        Raises InvalidParams (an unknown provider), StorageError."""
        from chat_history.policy.budget import resolve_route
        from chat_history.providers import format_body

        del tools  # accepted for symmetry with prepare; format sends the whole history
        route = resolve_route(provider or self.settings.active_provider, model, self.settings)
        rows, _ = self.history(key)
        return ProviderRequest(
            provider=route.name, model=route.model, body=format_body(route.kind, rows, route.model)
        )

    def prepare(self, key: Key, options: PrepareOptions) -> PreparedRequest:
        """The request to send now: the history after retention, the summary standing in for
        the turns it covers, fitted to the route's budget (turn limit, token budget, tool-context
        collapse, recovery) with estimates calibrated by the route's usage reports, and
        formatted for the provider; with a compaction proposal when the history nears the
        budget. Reads only what it can send when the recorded turn figures allow
        (``policy.readplan``). Sends the request's ``chatHistory/trimmed`` events.

        Returns the body with its estimates, budget, window, what was trimmed, collapsed or
        compacted, and the proposal. Raises InvalidParams (an unknown provider),
        ContextOverflow, StorageError."""
        from chat_history.policy.budget import resolve_route

        route = resolve_route(
            options.provider or self.settings.active_provider, options.model, self.settings
        )
        with self._lock:
            prepared = self._retained_read(
                key, lambda tx, _: self._prepare_in(tx, key, route, options)
            )
        if prepared.events:
            self._notify(key, prepared.events)
        return _prepared_request(route, prepared)

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
            with self.store.write() as tx:
                ratios = tx.add_calibration_ratio(
                    key.kind, key.model, usage_ratio(estimated, prompt)
                )
            return calibration_of(ratios)

    def save_summary(self, key: Key, summary: str, covers_through_id: int | None = None) -> Summary:
        """Save (or replace) the conversation's summary, stamped now; ``covers_through_id`` is
        the newest row it covers and must be a row of the conversation. Returns the saved
        summary. Raises InvalidParams ``coversThroughId`` (then nothing changed), StorageError."""
        with self._lock:
            saved = Summary(
                summary=summary, updated_at=self._clock(), covers_through_id=covers_through_id
            )
            with self.store.write() as tx:
                if covers_through_id is not None and not tx.has_row(key, covers_through_id):
                    raise InvalidParams(
                        "coversThroughId",
                        f"{covers_through_id} is not a row of this conversation",
                    )
                replaced = conversations.save_summary(tx, key, saved)
            if replaced:  # the old text is replaced, so it goes like deleted text
                self.store.reset_wal()
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
            with self.store.write() as tx:
                deleted = tx.clear(key)
            self.store.reset_wal()
            return deleted

    def list_conversations(self, workspace: str) -> list[ConversationRecord]:
        """The workspace's conversations with rows or a summary, most recently active first
        (no retention). Raises StorageError."""
        with self._lock, self.store.read() as tx:
            return tx.conversations(workspace)

    # -- version 2: conversations and edits (chat_history.conversations) ---------------------
    # One transaction each, no retention and no chatHistory/trimmed (the client asked for this
    # change); the WAL is reset after the ones that delete or replace text.

    def conversation(self, key: Key) -> ConversationInfo:
        """The conversation's ConversationInfo (that of an empty one when it does not exist)."""
        with self._lock, self.store.snapshot() as tx:
            return conversations.info(tx, key)

    def list_conversations_page(
        self, workspace: str | None, limit: int | None, after: CursorPosition | None
    ) -> ConversationPage:
        """The conversations of ``workspace`` (None: every workspace) after the cursor position
        ``after``, newest activity first, at most ``limit`` (None: all) and the next cursor.
        Raises StorageError."""
        with self._lock, self.store.snapshot() as tx:
            return conversations.list_page(tx, workspace, limit, after)

    def update_conversation(self, key: Key, change: ConversationUpdate) -> ConversationInfo:
        """Set the title and/or replace the metadata (protocol.md ``updateConversation``)."""
        with self._lock:
            with self.store.write() as tx:
                info = conversations.update(tx, key, change, self._clock())
            self.store.reset_wal()  # a replaced title or metadata is text that goes
            return info

    def truncate(self, key: Key, from_id: int) -> TruncateResult:
        """Delete row ``from_id`` and every later row (and a summary covering them).
        Raises InvalidParams ``fromId``, StorageError."""
        with self._lock:
            with self.store.write() as tx:
                result = conversations.truncate(tx, key, from_id, self._clock())
            self.store.reset_wal()
            return result

    def delete_turns(self, key: Key, turns: Sequence[int]) -> DeleteTurnsResult:
        """Delete every row of the named turns. Raises InvalidParams ``turns``/``turns[i]``."""
        from chat_history.policy.rewind import check_turns

        check_turns(turns)
        with self._lock:
            with self.store.write() as tx:
                result = conversations.delete_turns(tx, key, turns, self._clock())
            if result.deleted_messages:
                self.store.reset_wal()
            return result

    def edit_message(self, key: Key, row_id: int, edit: MessageEdit) -> StoredMessage:
        """Replace a row's content, attachments and/or metadata in place; returns the row as
        now stored. Raises InvalidParams ``id``/``content``, StorageError."""
        with self._lock:
            with self.store.write() as tx:
                edited = conversations.edit_message(
                    tx,
                    key,
                    row_id,
                    edit,
                    max_tool_result_chars=self.settings.max_tool_result_chars,
                    now=self._clock(),
                )
            self.store.reset_wal()  # the old text goes
            return edited

    def fork(self, key: Key, target: Key, through_id: int | None = None) -> ConversationInfo:
        """Copy the conversation through ``through_id`` (default: all) into ``target``.
        Raises InvalidParams ``newConversationId``/``conversationId``/``throughId``."""
        with self._lock, self.store.write() as tx:
            return conversations.fork(tx, key, target, through_id, self._clock())

    def delete_summary(self, key: Key) -> bool:
        """Delete the summary; returns whether there was one. Raises StorageError."""
        with self._lock:
            with self.store.write() as tx:
                deleted = conversations.delete_summary(tx, key, self._clock())
            if deleted:
                self.store.reset_wal()
            return deleted

    def list_workspaces(self) -> list[str]:
        """Every workspace holding rows or a summary, sorted. Raises StorageError."""
        with self._lock, self.store.read() as tx:
            return tx.workspaces()

    # -- version 3: workspace identity (chat_history.workspaces) ----------------------------

    def open_identity(self, identity: workspaces.Identity, machine: str) -> list[str]:
        """Before a session's first request under ``identity``: re-key other spellings and a
        moved folder's history, record the fingerprint (one transaction). Returns what moved."""
        with self._lock, self.store.write() as tx:
            return workspaces.open_identity(tx, identity, machine, self._clock())

    def move_workspace(self, source: str, target: str) -> int:
        """Re-key every conversation of ``source`` to ``target`` (one transaction); returns how
        many. Raises InvalidParams ``to`` when a conversation id is in both, StorageError."""
        with self._lock, self.store.write() as tx:
            return workspaces.move_workspace(tx, source, target)

    def purge(self) -> bool:
        """The engine's purge of deleted text, now (the CLI's ``purge``)."""
        return self.store.purge_now()

    def workspace_infos(self, machine: str) -> list[workspaces.WorkspaceInfo]:
        """``listWorkspaces``: every workspace with conversations, newest activity first."""
        with self._lock, self.store.snapshot() as tx:
            return workspaces.list_workspaces(tx, machine)

    def stats(self) -> DatabaseStats:
        """Counts and the oldest/newest timestamps of the whole database. Raises StorageError."""
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
                with self.store.write() as tx:
                    tx.index_for_search()
            with self.store.snapshot() as reading:
                rows = reading.search_candidates(scope, parsed)
                keys = dict.fromkeys(Key(row.workspace, row.conversation) for row in rows)
                due = [key for key in keys if not self._retention.nothing_due(reading, key, now)]
            if due:
                for key in due:
                    self._retention.run(key, now)
                with self.store.snapshot() as reading:
                    rows = reading.search_candidates(scope, parsed)
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
            result, replaced = self._import_in(key, messages, summary)
            if replaced:
                self.store.reset_wal()
            return result

    # -- steps ------------------------------------------------------------------------------

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
        from chat_history.policy.context import turn_figures

        completed: list[tuple[int, tuple[int, ...]]] = []
        start = 0
        for index in range(1, len(rows)):
            if rows[index].turn != rows[start].turn:
                figures = turn_figures(rows[start:index])
                if figures.turns:
                    completed.append((rows[start].turn, figures.as_tuple()))
                start = index
        tx.add_turn_figures(key, completed)

    def _request_rows(self, key: Key, route: Route, options: PrepareOptions) -> RequestRows:
        """What ``prepare`` reads: the newest turns it can send, all older system rows and the
        figures of the older turns (so the cost follows the request, not the history), or every
        row when those figures are missing or do not add up to the store's totals."""
        with self._lock:
            return self._retained_read(
                key, lambda tx, _: self._read_request_rows(tx, key, route, options)
            )

    def _read_request_rows(
        self, tx: Reading, key: Key, route: Route, options: PrepareOptions
    ) -> RequestRows:
        summary = tx.summary(key)
        window = self._window(tx, key, route, options, summary)
        if window is None:
            return tx.all_rows(key), None, summary
        return window[0], window[1], summary

    def _prepare_in(self, tx: Reading, key: Key, route: Route, options: PrepareOptions) -> Prepared:
        """``prepare_rows`` on what the read plan reads, in one snapshot: the window; with the
        oldest uncovered turns too when a due proposal needs them; else every row."""
        from chat_history.policy.calibration import calibration_of, key_of
        from chat_history.policy.context import OmittedTurnsKept, RequestOptions, prepare_rows

        rows, omitted, summary = self._read_request_rows(tx, key, route, options)
        calibration_key = key_of(route)
        request = RequestOptions(
            settings=self.settings.context,
            route=route,
            summary=summary,
            tools=options.tools,
            extra_tokens=options.extra_tokens,
            overflow_recovery=options.overflow_recovery,
            keep_tool_context_turns=options.keep_tool_context_turns,
            calibration=calibration_of(
                tx.calibration_ratios(calibration_key.kind, calibration_key.model)
            ),
            propose_compaction=True,
        )
        if omitted is None:
            return prepare_rows(rows, request)
        # The oldest uncovered turns are read only when a due proposal needs them.
        head = functools.partial(self._head, tx, key, route, rows, request)
        with contextlib.suppress(OmittedTurnsKept):  # a window that was too small: still correct
            return prepare_rows(rows, attrs.evolve(request, omitted=omitted, head=head))
        return prepare_rows(tx.all_rows(key), request)

    def _window(
        self,
        tx: Reading,
        key: Key,
        route: Route,
        options: PrepareOptions,
        summary: Summary | None,
    ) -> tuple[list[StoredMessage], OmittedTurns | None] | None:
        """The read plan (``policy.readplan``) carried out in ``tx``: the rows to send and the
        turns left unread (those the summary covers among them), or None when every row must
        be read."""
        from chat_history.policy import readplan
        from chat_history.policy.compaction import honoured_coverage

        limits = readplan.read_limits(self.settings.context, route, options.keep_tool_context_turns)
        cover = honoured_coverage(summary)
        first_uncovered = None if cover is None else self._first_uncovered_turn(tx, key, cover)
        with contextlib.closing(tx.newest_first(key)) as newest:
            if first_uncovered is None:
                back = readplan.read_back(newest, limits)
            else:
                back = readplan.read_back(readplan.until_turn(newest, first_uncovered), limits)
        if not back.rows or (back.whole and first_uncovered is None):
            return back.rows, None
        start = back.rows[0]
        read = [*tx.system_rows(key, start.id), *back.rows]
        oldest_spoken = tx.oldest_spoken(key)
        if oldest_spoken is None or oldest_spoken[1] >= start.turn:
            return read, None  # only system rows are older
        oldest_id, oldest = oldest_spoken
        first = oldest if first_uncovered is None else max(oldest, first_uncovered)
        groups = readplan.omitted_figures(
            [
                readplan.covered_range(oldest, first_uncovered),
                *readplan.omitted_ranges(first, start.turn, back.turns, limits.keep_turns),
            ],
            lambda first, last: tx.figures_between(key, first, last),
        )
        if groups is None:
            return None  # turns written before schema 2
        totals = tx.totals(key)
        assert totals is not None
        covered, beyond, within = groups
        omitted = readplan.checked_omission(
            beyond,
            within,
            left_out=readplan.left_out(totals.message_count, totals.tokens, read),
            tools_given=options.tools is not None,
            covered=covered,
            covers_through_id=cover,
            oldest_spoken_id=oldest_id,
        )
        return None if omitted is None else (read, omitted)

    def _first_uncovered_turn(self, tx: Reading, key: Key, cover: int) -> int | None:
        """The oldest turn a summary covering through ``cover`` leaves uncovered: the turn of
        the first row after it, else the newest turn (never covered)."""
        turn = tx.turn_after(key, cover)
        if turn is None:
            totals = tx.totals(key)
            return totals.last_turn if totals is not None else None
        return turn

    def _head(
        self,
        tx: Reading,
        key: Key,
        route: Route,
        rows: Sequence[StoredMessage],
        request: RequestOptions,
    ) -> list[StoredMessage]:
        """A due proposal's ``head`` (``RequestOptions.head``): the system rows before the
        oldest uncovered turn, then that turn and the next ones, oldest first, up to the
        window's first turn or as far as a proposal can hold (``readplan.read_head``)."""
        from chat_history.policy import readplan
        from chat_history.policy.budget import effective_budget
        from chat_history.policy.compaction import honoured_coverage

        stop = next((row for row in rows if row.role != "system"), None)
        if stop is None:
            return []
        context = self.settings.context
        limit = effective_budget(context, route) - context.compaction_max_summary_tokens
        summary = request.summary
        cover = honoured_coverage(summary if isinstance(summary, Summary) else None)
        prefix: list[StoredMessage] = []
        after = 0
        if cover is not None:
            turn = tx.turn_after(key, cover)
            if turn is None:
                return []
            prefix, after = tx.turn_rows_before(key, cover + 1, turn), cover
        with contextlib.closing(tx.oldest_first(key, after)) as newer:
            turns = readplan.read_head(
                itertools.chain(prefix, newer),
                stop_id=stop.id,
                limit=limit,
                calibration=request.calibration,
            )
        if not turns or cover is None:
            return turns
        return [*tx.system_rows(key, turns[0].id), *turns]

    def _import_in(
        self, key: Key, messages: Sequence[Message], summary: ImportedSummary | None
    ) -> tuple[ImportResult, bool]:
        """``import_conversation`` in one write transaction: its result, and whether it replaced
        a stored summary."""
        with self.store.write() as tx:
            totals = tx.totals(key)
            match = match_stored(tx.rows_from(key, 0) if totals else [], messages)
            new = [
                m if m.timestamp is not None else attrs.evolve(m, timestamp=self._clock())
                for m in messages[match.start :]
            ]
            inserted = self._import_rows(tx, key, totals, new, match.start) if new else []
            saved = replaced = False
            current = tx.summary(key)
            if summary is not None and (current is None or current.updated_at < summary.updated_at):
                through = covered_id(summary.covers_messages, match, inserted)
                replaced = tx.save_summary(
                    key,
                    Summary(
                        summary=summary.summary,
                        updated_at=summary.updated_at,
                        covers_through_id=through,
                    ),
                )
                saved = True
            return ImportResult(tuple(inserted), match.start, saved), replaced

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
        try:
            inserted, _ = self._record_in(
                tx,
                key,
                totals,
                new,
                max_tool_result_chars=0,
                now=max(newest, totals.last_activity if totals else 0),
            )
        except InvalidParams as exc:  # name the row among ``messages``, not ``new``
            index, _, rest = exc.field.removeprefix("messages[").partition("]")
            raise InvalidParams(f"messages[{int(index) + skipped}]{rest}", exc.why) from None
        return inserted


def _prepared_request(route: Route, prepared: Prepared) -> PreparedRequest:
    """``prepare``'s result: the rows and the proposal's rows formatted for the route."""
    from chat_history.providers import format_body

    proposal = prepared.compaction
    compaction = None
    if proposal is not None:
        compaction = CompactionProposal(
            through_id=proposal.through_id,
            covered_turns=proposal.covered_turns,
            estimated_tokens=proposal.estimated_tokens,
            raw_estimated_tokens=proposal.raw_estimated_tokens,
            request=ProviderRequest(
                provider=route.name,
                model=route.model,
                body=format_body(route.kind, proposal.rows, route.model, swept=True),
            ),
        )
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
        compaction=compaction,
        compacted_turns=prepared.compacted_turns,
        compacted_messages=prepared.compacted_messages,
        raw_estimated_tokens=prepared.raw_estimated_tokens,
        calibration=prepared.calibration,
    )
