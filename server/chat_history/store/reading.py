"""The store's read face to the manager: a ``Reading`` per ``Store.read()`` or ``snapshot()``
(and the base of every ``Transaction``), whose methods are every query an operation makes; a
read section has no method that writes. ``sync_cache`` drops the cache when another connection
committed. The manager never sees a connection."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Collection, Generator, Mapping, Sequence

from chat_history.model import Key, Message, NativeCompaction, StoredMessage, Summary
from chat_history.policy.changes import Fingerprint, Growth
from chat_history.policy.search.query import SearchQuery
from chat_history.policy.search.rank import SearchRow, SearchScope
from chat_history.store import (
    calibration,
    changes,
    edits,
    keys,
    overview,
    provider_state,
    queries,
    records,
    search_index,
    search_lookup,
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
    """When another connection committed since the cache's rows were read, drop the
    conversations it changed (the change marks past the cache's position, store.changes); the
    whole cache only when it has no position."""
    if not len(cache):
        # Nothing cached, nothing can be stale: skip the pragma (one statement of every
        # append). The baseline is read again before the next conversation is cached.
        cache.version = None
        cache.position = None
        return
    version = queries.data_version(connection)
    if version != cache.version:
        position = changes.position(connection)  # before the marks: none is missed
        if cache.position is None or changes.floor(connection) > cache.position:
            cache.clear()  # no position, or marks deleted since it: any may be gone
        else:
            for key in changes.changed_keys(connection, cache.position):
                cache.drop(key)
        cache.version = version
        cache.position = position


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
        if self._cache.version is None or self._cache.position is None:
            # Before the rows: a commit in between only makes the next check drop it again.
            self._cache.version = queries.data_version(self.connection)
            self._cache.position = changes.position(self.connection)
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

    def compaction(self, key: Key) -> NativeCompaction | None:
        """The conversation's native compaction (``saveCompaction``), or None."""
        return provider_state.compaction(self.connection, key)

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

    def change_position(self) -> int:
        """The change counter now (store.changes): read it before ``changed_in``."""
        return changes.position(self.connection)

    def change_floor(self) -> int:
        """The counter at the newest commit that deleted change marks (store.changes): a reader
        whose position is below it cannot tell from the marks which conversations went."""
        return changes.floor(self.connection)

    def changed_in(self, workspace: str, after: int) -> set[str]:
        """The conversations of ``workspace`` committed changes touched since the counter was
        ``after`` (a superset: this connection's own are there too)."""
        return changes.changed_in(self.connection, workspace, after)

    def fingerprints(self, workspace: str) -> dict[str, Fingerprint]:
        """Every existing conversation of ``workspace``'s fingerprint, by id."""
        return changes.fingerprints(self.connection, workspace)

    def fingerprint(self, key: Key) -> Fingerprint | None:
        return changes.fingerprint(self.connection, key)

    def growth(self, key: Key, after_id: int | None) -> Growth:
        """The rows newer than ``after_id``: how many, and their tokens."""
        return changes.growth(self.connection, key, after_id)

    #: whether ``refresh`` reads in one statement, so one commit (the watch may then look in a
    #: ``read()`` section; else it opens a snapshot)
    REFRESH_IN_ONE_STATEMENT = False

    def refresh(
        self, workspace: str, before: Mapping[str, Fingerprint], marked: Collection[str]
    ) -> tuple[dict[str, Fingerprint], dict[str, Growth]]:
        """The fingerprints now of the ``marked`` conversations that exist, and the growth past
        the newest id in ``before`` of each in ``before`` whose fingerprint moved."""
        now: dict[str, Fingerprint] = {}
        for conversation in marked:
            found = self.fingerprint(Key(workspace, conversation))
            if found is not None:
                now[conversation] = found
        growth = {
            conversation: self.growth(Key(workspace, conversation), old.last_id)
            for conversation, old in before.items()
            if conversation in now and now[conversation] != old
        }
        return now, growth

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
        return search_lookup.best_rows(self.connection, scope, query, count)

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

    def rename_records(self) -> list[workspace_sql.RenameRow]:
        """Every existing conversation's record of the rename re-keying made, newest first."""
        return workspace_sql.renames(self.connection)
