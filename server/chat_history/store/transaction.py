"""The store's face to the manager: a ``Reading`` per ``Store.read()`` or ``snapshot()`` and a
``Transaction`` per ``Store.write()``, whose methods are every query and change an operation
makes (a read section has no method that writes). A write that raises is rolled back whole: a
failed operation changes nothing. The manager never sees a connection; the cache and the
remembered tail are kept in step here."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Generator, Iterable, Sequence

import attrs

from chat_history.model import Key, Message, StoredMessage, Summary
from chat_history.policy.changes import Fingerprint, Growth
from chat_history.policy.search import SearchQuery
from chat_history.policy.search_rank import SearchRow, SearchScope
from chat_history.store import (
    calibration,
    changes,
    edits,
    keys,
    overview,
    queries,
    records,
    search_index,
)
from chat_history.store import workspaces as workspace_sql
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.engine import sqlite3
from chat_history.store.overview import DatabaseStats
from chat_history.store.queries import ConversationTotals, RowMetaRecord
from chat_history.store.records import RecordRow
from chat_history.store.rows import to_message
from chat_history.store.tail import Tails


def sync_cache(cache: ConversationCache, connection: sqlite3.Connection) -> None:
    """Drop the cache when another connection committed since its rows were read."""
    if not len(cache):
        # Nothing cached, nothing can be stale: skip the pragma (one statement of every
        # append). The baseline is read again before the next conversation is cached.
        cache.version = None
        return
    version = queries.data_version(connection)
    if version != cache.version:
        cache.clear()
        cache.version = version


class Reading:
    """What one operation may read, on one connection: in a ``read()`` section each query sees
    its own commit, in a ``snapshot()`` (or a write) one commit throughout."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        cache: ConversationCache,
        tails: Tails,
        ratios: calibration.RatioMemo | None = None,
    ) -> None:
        #: the raw connection, for what no method covers (tests, diagnostics)
        self.connection = connection
        self._cache = cache
        self._tails = tails
        self._ratios = ratios if ratios is not None else calibration.RatioMemo()

    def revision(self) -> tuple[int, int]:
        """Changes whenever the database may have changed: this connection began a write, or
        another one committed (``data_version``). Equal revisions read equal data."""
        return self._tails.writes, queries.data_version(self.connection)

    # -- one conversation's rows ------------------------------------------------------------

    def totals(self, key: Key) -> ConversationTotals | None:
        """The conversation's totals; inside a write or snapshot remembered while no other
        connection has committed (one pragma instead of a read)."""
        if self._tails.in_transaction:
            return self._tails.tail(self.connection, key).totals
        return queries.totals(self.connection, key)

    def all_rows(self, key: Key) -> list[StoredMessage]:
        """Every row of the conversation, in order: from the cache when it holds them."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self._cache.version is None:
            # Before the rows: a commit in between only makes the next check drop the cache.
            self._cache.version = queries.data_version(self.connection)
        rows = queries.rows_from(self.connection, key, 0)
        self._cache.put(key, rows)
        return rows

    def rows_from(self, key: Key, first_id: int) -> list[StoredMessage]:
        """The rows with ids from ``first_id`` on, in order (read, never cached)."""
        return queries.rows_from(self.connection, key, first_id)

    def page(self, key: Key, limit: int, before_id: int | None) -> tuple[list[StoredMessage], bool]:
        """Up to ``limit`` rows before ``before_id`` (the newest when None), in order, and
        whether older ones exist. The newest page, inside a snapshot, comes through
        ``newest_first``: from memory when this connection remembers the rows."""
        if before_id is None and self._tails.in_transaction:
            with contextlib.closing(self.newest_first(key)) as newest:
                rows = list(itertools.islice(newest, limit + 1))
        else:
            bound = before_id if before_id is not None else queries.NO_ID
            cursor = queries.rows_before(self.connection, key, bound, limit + 1)
            rows = [to_message(r) for r in cursor]
        has_more = len(rows) > limit
        return list(reversed(rows[:limit])), has_more

    def newest_first(self, key: Key) -> Generator[StoredMessage, None, None]:
        """The conversation's rows newest first, each read when it is consumed (snapshot or
        write only); close it when done."""
        return self._tails.newest_first(self.connection, key)

    def current_turn(self, key: Key, totals: ConversationTotals) -> list[StoredMessage]:
        """The rows of the conversation's newest turn (from ``totals``)."""
        return self._tails.current_turn(self.connection, key, totals)

    def system_rows(self, key: Key, before_id: int) -> list[StoredMessage]:
        """The system rows older than ``before_id``, in order."""
        return queries.system_rows(self.connection, key, before_id)

    def oldest_spoken(self, key: Key) -> tuple[int, int] | None:
        """The (id, turn number) of the oldest non-system row (None: there is none)."""
        return queries.oldest_spoken(self.connection, key)

    def has_row(self, key: Key, row_id: int) -> bool:
        """Whether ``row_id`` is a row of this conversation."""
        return queries.has_row(self.connection, key, row_id)

    def turn_after(self, key: Key, row_id: int) -> int | None:
        """The turn of the oldest row newer than ``row_id`` (None: there is none)."""
        return queries.turn_after(self.connection, key, row_id)

    def turn_rows_before(self, key: Key, row_id: int, turn: int) -> list[StoredMessage]:
        """The rows of ``turn`` older than ``row_id``, in order (a turn that ``row_id`` cuts)."""
        found: list[StoredMessage] = []
        with contextlib.closing(queries.rows_before(self.connection, key, row_id)) as cursor:
            for raw in cursor:
                row = to_message(raw)
                if row.turn != turn:
                    break
                found.append(row)
        return found[::-1]

    def oldest_first(self, key: Key, after_id: int) -> Generator[StoredMessage, None, None]:
        """The rows newer than ``after_id``, oldest first, each read when it is consumed (close
        it when done)."""
        with contextlib.closing(queries.rows_after(self.connection, key, after_id)) as cursor:
            for raw in cursor:
                yield to_message(raw)

    def row_meta(self, key: Key) -> list[RowMetaRecord]:
        """Every row's id, turn, role, tokens and timestamp, in order (what retention plans on)."""
        return queries.row_meta(self.connection, key)

    def figures_between(self, key: Key, first_turn: int, last_turn: int) -> tuple[int, ...] | None:
        """The summed figures of turns ``first_turn``..``last_turn``; None when either end has
        none (turns written before schema 2)."""
        return self._tails.figures_between(self.connection, key, first_turn, last_turn)

    # -- summaries --------------------------------------------------------------------------

    def summary(self, key: Key) -> Summary | None:
        """The conversation's summary, or None."""
        return queries.summary(self.connection, key)

    # -- version 2: conversation records, rows by id and turn (store.records, store.edits) ----

    def record(self, key: Key) -> RecordRow | None:
        """The conversation's record; None when it does not exist."""
        return records.record(self.connection, key)

    def listing(
        self, workspace: str | None, after: tuple[int, str, str] | None, limit: int | None
    ) -> list[RecordRow]:
        """Existing conversations newest activity first (store.records.listing)."""
        return records.listing(self.connection, workspace, after, limit)

    def cursor_key(self) -> bytes:
        """The key that authenticates this database's listing cursors (store.keys)."""
        return keys.cursor_key(self.connection)

    def user_rows(self, key: Key) -> Generator[Message, None, None]:
        """The conversation's user rows oldest first, read as consumed (close it when done)."""
        return records.user_rows(self.connection, key)

    def row(self, key: Key, row_id: int) -> StoredMessage | None:
        """The conversation's row ``row_id``; None when it is not one of its rows."""
        return edits.row(self.connection, key, row_id)

    def rows_of_turns(self, key: Key, turns: Sequence[int]) -> list[StoredMessage]:
        """Every row of the named turns, oldest first."""
        return edits.rows_of_turns(self.connection, key, turns)

    def turn_rows(self, key: Key, turn: int) -> list[StoredMessage]:
        """Every row of one turn, oldest first."""
        return edits.rows_of_turns(self.connection, key, [turn])

    def last_id(self, key: Key) -> int | None:
        """The conversation's newest row id; None when it has no rows."""
        return edits.last_id(self.connection, key)

    def rows_through(self, key: Key, row_id: int) -> int:
        """How many of the conversation's rows have ids ≤ ``row_id``."""
        return edits.rows_through(self.connection, key, row_id)

    # -- the change watch (chat_history.service.watch) ---------------------------------------------

    def change_token(self) -> tuple[int, int]:
        """Moves whenever another connection commits (SQLite's ``data_version`` on this
        connection; a new connection's is not comparable, so its identity is part of it)."""
        return (id(self.connection), queries.data_version(self.connection))

    def fingerprints(self, workspace: str) -> dict[str, Fingerprint]:
        """Every existing conversation of ``workspace``'s fingerprint, by id."""
        return changes.fingerprints(self.connection, workspace)

    def fingerprint(self, key: Key) -> Fingerprint | None:
        return changes.fingerprint(self.connection, key)

    def growth(self, key: Key, after_id: int | None) -> Growth:
        """The rows newer than ``after_id``: how many, and their tokens."""
        return changes.growth(self.connection, key, after_id)

    # -- calibration ------------------------------------------------------------------------

    def calibration_ratios(self, kind: str, model: str | None) -> tuple[float, ...]:
        """The newest usage ratios of (kind, model), oldest first: remembered by the connection
        while no other connection has committed (one pragma instead of a read)."""
        return self._ratios.ratios(self.connection, kind, model)

    # -- the whole database -----------------------------------------------------------------

    def stats(self) -> DatabaseStats:
        """The whole database's totals (``chat-history stats``)."""
        return overview.stats(self.connection)

    # -- search -----------------------------------------------------------------------------

    def search_backlog(self) -> bool:
        """Whether rows wait to be indexed for search."""
        return search_index.backlog(self.connection)

    def search_best(self, scope: SearchScope, query: SearchQuery, count: int) -> list[SearchRow]:
        """The ``count`` best rows in ``scope`` that hold every term of ``query``, ranked among
        all of them (snapshot or write: the index and its catch-up mark are read together)."""
        return search_index.best_rows(self.connection, scope, query, count)

    # -- version 3: workspace identities (store.workspaces) ---------------------------------

    def workspace_rows(self) -> list[workspace_sql.WorkspaceRow]:
        """Every workspace with conversations, newest activity first."""
        return workspace_sql.workspaces(self.connection)

    def conversation_ids(self, workspace: str) -> set[str]:
        """The ids of the workspace's existing conversations."""
        return workspace_sql.conversation_ids(self.connection, workspace)

    def folder_records(self) -> list[workspace_sql.FolderRow]:
        """Every recorded folder fingerprint, newest first."""
        return workspace_sql.folders(self.connection)


class Transaction(Reading):
    """A ``Reading`` that may also change the database: handed out by ``Store.write()`` only,
    inside one write transaction that commits when the block ends and rolls back whole when it
    raises. ``touched`` names every conversation it changed (what the change watch re-reads)."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        cache: ConversationCache,
        tails: Tails,
        ratios: calibration.RatioMemo | None = None,
    ) -> None:
        super().__init__(connection, cache, tails, ratios)
        self.touched: set[Key] = set()

    def insert(
        self,
        key: Key,
        rows: Sequence[tuple[Message, int, int]],
        totals: ConversationTotals | None,
        now_ms: int,
    ) -> tuple[list[StoredMessage], ConversationTotals]:
        """Insert (message, turn, tokens) rows in order (a row without a timestamp gets
        ``now_ms``) and update the conversation's ``totals``; returns the rows and the new
        totals."""
        self.touched.add(key)
        stored: list[StoredMessage] = []
        # The conversation starts existing now (again, after retention emptied it).
        created = totals is None or (
            totals.message_count == 0 and not records.exists(self.connection, key)
        )
        count = totals.message_count if totals else 0
        tokens = totals.tokens if totals else 0
        last_turn = totals.last_turn if totals else 0
        turn_start = totals.turn_start_id if totals else 0
        oldest = totals.oldest_timestamp if totals else None
        for message, turn, row_tokens in rows:
            timestamp = now_ms if message.timestamp is None else message.timestamp
            row_id = queries.insert_row(self.connection, key, message, turn, row_tokens, timestamp)
            if turn != last_turn or turn_start == 0:
                turn_start = row_id
            last_turn = turn
            count += 1
            tokens += row_tokens
            oldest = timestamp if oldest is None else min(oldest, timestamp)
            stored.append(
                StoredMessage.of(
                    message, id=row_id, turn=turn, tokens=row_tokens, timestamp=timestamp
                )
            )
        after = ConversationTotals(count, tokens, last_turn, turn_start, oldest, now_ms)
        queries.write_totals(self.connection, key, after, existed=totals is not None)
        if created:
            records.set_created(self.connection, key, now_ms)
        self._cache.extend(key, stored)
        self._tails.track(key, after, stored)
        return stored, after

    def rows_changed(self, key: Key) -> None:
        """Rows of the conversation changed by SQL outside these methods (store.reply_section):
        what this connection remembers of it goes."""
        self.touched.add(key)
        self._cache.drop(key)
        self._tails.drop(key)

    def delete_rows(self, key: Key, ids: Iterable[int]) -> None:
        """Delete rows by id and recompute the conversation's totals from what is left."""
        self.touched.add(key)
        id_list = sorted(ids)
        queries.delete_rows(self.connection, key, id_list)
        self._cache.remove_ids(key, set(id_list))
        self._tails.drop(key)  # its totals changed

    def clear(self, key: Key) -> int:
        """Delete the whole conversation and its summary; returns the rows deleted."""
        self.touched.add(key)
        deleted = queries.clear(self.connection, key)
        self._cache.drop(key)
        self._tails.drop(key)
        return deleted

    def add_turn_figures(self, key: Key, figures: Sequence[tuple[int, Sequence[int]]]) -> None:
        """Record completed turns' figures (turn number, values in FIGURES order)."""
        self._tails.add_turn_figures(self.connection, key, figures)

    def save_summary(self, key: Key, summary: Summary) -> bool:
        """Save the conversation's summary; returns whether it replaced one. A conversation
        that did not exist is created (its record made) when the summary is saved."""
        self.touched.add(key)
        if not records.exists(self.connection, key):
            records.ensure(self.connection, key, summary.updated_at)
            records.set_created(self.connection, key, summary.updated_at)
            self._tails.drop(key)
        return queries.save_summary(self.connection, key, summary)

    def delete_summary(self, key: Key) -> bool:
        """Delete the summary; returns whether there was one."""
        self.touched.add(key)
        return edits.delete_summary(self.connection, key)

    # -- version 2: records and edits (store.records, store.edits) --------------------------

    def touch(self, key: Key, now: int) -> None:
        """A client wrote to the conversation at ``now`` (its lastActivity); a conversation that
        did not exist is created by it."""
        self.touched.add(key)
        created = not records.exists(self.connection, key)
        records.touch(self.connection, key, now, created=created)
        # Its totals changed (last_activity; a record made when there was none).
        self._tails.amend(key, queries.totals(self.connection, key))

    def set_title(self, key: Key, title: str | None) -> None:
        """The client's title (None: none; the automatic one shows). The record must exist."""
        self.touched.add(key)
        records.set_title(self.connection, key, title)

    def set_metadata(self, key: Key, text: str | None) -> None:
        """The conversation's metadata as compact JSON text (None: empty). The record must
        exist."""
        self.touched.add(key)
        records.set_metadata(self.connection, key, text)

    def delete_messages(self, key: Key, rows: Sequence[StoredMessage]) -> ConversationTotals | None:
        """Delete ``rows`` (read in this transaction) by id; totals, turn figures, the cache and
        the tail follow. Returns the new totals."""
        self.touched.add(key)
        totals = self.totals(key)
        if totals is None or not rows:
            return totals
        after = edits.delete(self.connection, key, rows, totals)
        removed = frozenset(row.id for row in rows)
        self._cache.remove_ids(key, set(removed))
        self._tails.amend(key, after, removed=removed)
        return after

    def update_message(self, key: Key, old: StoredMessage, new: StoredMessage) -> None:
        """Store ``new`` (an edit of ``old``: content, attachments, metadata, tokens) in place;
        the conversation's token total follows."""
        self.touched.add(key)
        edits.update_row(self.connection, key, new)
        totals = self.totals(key)
        if totals is not None and new.tokens != old.tokens:
            totals = attrs.evolve(totals, tokens=totals.tokens + new.tokens - old.tokens)
            queries.write_totals(self.connection, key, totals, existed=True)
        self._cache.replace(key, new)
        self._tails.amend(key, totals, replaced=new)

    def replace_turn_figures(self, key: Key, turn: int, own: Sequence[int]) -> None:
        """An edited completed turn's figures (values in FIGURES order)."""
        edits.replace_turn_figures(self.connection, key, turn, own)
        self._tails.amend(key, self.totals(key))  # the running sums are read again

    def copy_conversation(self, source: Key, target: Key, through_id: int, now: int) -> int:
        """Copy the source's rows through ``through_id`` into ``target`` (which must not exist),
        created and active ``now``. Returns the id before the first copy (the n-th source row's
        copy has id base + n)."""
        self.touched.add(target)
        existed = queries.totals(self.connection, target) is not None
        totals, base = edits.copy(self.connection, source, target, through_id, now)
        queries.write_totals(self.connection, target, totals, existed=existed)
        records.set_created(self.connection, target, now)
        self._cache.drop(target)
        self._tails.drop(target)
        return base

    def index_for_search(self) -> int:
        """Index the next rows written since the last catch-up; returns how many."""
        return search_index.catch_up(self.connection)

    def move_workspace(self, source: str, target: str) -> set[str]:
        """Re-key every conversation of ``source`` to ``target``; returns the ids that collide
        with existing conversations of ``target`` (then nothing moved)."""
        moving = workspace_sql.keyed_ids(self.connection, source)
        taken = workspace_sql.keyed_ids(self.connection, target) & moving
        clash = workspace_sql.conversation_ids(self.connection, target) & taken
        if clash:
            return clash
        workspace_sql.drop_empty(self.connection, target, taken)
        workspace_sql.move(self.connection, source, target)
        self._cache.clear()
        self._tails.clear()
        return set()

    def record_folder(self, row: workspace_sql.FolderRow) -> None:
        workspace_sql.record_folder(self.connection, row)

    def forget_folder(self, workspace: str, machine: str) -> None:
        workspace_sql.forget_folder(self.connection, workspace, machine)

    def add_calibration_ratio(
        self, kind: str, model: str | None, ratio: float
    ) -> tuple[float, ...]:
        """Record a usage ratio of (kind, model); returns its newest ratios, oldest first."""
        calibration.add_ratio(self.connection, kind, model, ratio)
        self._ratios.forget(kind, model)
        return calibration.ratios(self.connection, kind, model)
