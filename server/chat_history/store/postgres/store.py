"""``PostgresStore``: the store on a PostgreSQL ≥ 14 database (protocol.md "Version 3" → Storage
engines), with the same sections as the SQLite store (``read``, ``snapshot``, ``write``,
``purge_deleted``, ``close``) handing out the same ``Reading``/``Transaction`` over the shared
SQL (``dialect``); the write section is the shared one (``commit.WritePath``), with
PostgreSQL's steps here.

- **Connection** (``link.Link``). Opened lazily; psycopg 3, autocommit (the sections begin and
  end their transactions). A lost connection fails the request in flight with 1002 (its
  transaction never committed: nothing changed) and the next request connects again; what the
  connection remembered (cache, tails, ratios) is dropped. A connection lost during a write's
  COMMIT is settled by the write's token (``tokens``): the write answers as committed when it
  was, 1002 only when it was not.
- **Writes.** Every write names the conversations it changes (``write(keys)``) and locks them
  first (``locks``); the only row two writers of different conversations both change is the
  version counter, updated just before the commit. A deadlock or a serialization failure rolls
  the write back whole and raises ``WriteConflict`` (``seam.write_retried`` runs it again);
  waiting past ``lock_timeout`` answers 1002.
- **Coherence.** ``store_version`` counts each role's committed writes (a row per role: no
  other role's rows are visible to it, so no other role's writes matter to what it remembers);
  every write bumps its role's just before it commits. A write that reads the counter after its
  locks and finds it one below its own bump saw every commit before its own; else another writer
  (of another conversation) committed in between, and what this connection remembers is dropped.
  ``data_version`` (SQLite's pragma, to the shared code) moves with another's commit. Every section
  begins with the look (``marks``): the counter and, when it moved, the change marks past this
  connection's position, in one statement (with the marked conversations' fingerprints while
  another writes to the watched workspace: folded); the cache and the tails drop only the
  conversations the marks name (issue 35 item 15).
- **Purge.** A commit that removed text schedules its ``VACUUM FULL`` (``purge.PurgeSteps``).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, cast

from chat_history.errors import StorageError
from chat_history.model import Key
from chat_history.store import calibration, keys
from chat_history.store.commit import WriteObserver, WritePath
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.postgres import tokens
from chat_history.store.postgres.counter import BUMP, commit_statement
from chat_history.store.postgres.dialect import Connection
from chat_history.store.postgres.link import Link, is_database_error, rollback
from chat_history.store.postgres.locks import conversation_lock, lock_statements
from chat_history.store.postgres.marks import Looks
from chat_history.store.postgres.purge import PURGE_SECONDS, Purge, PurgeSteps
from chat_history.store.postgres.readings import PostgresReading, PostgresTransaction
from chat_history.store.tail import Tails
from chat_history.store.transaction import Reading, Transaction

if TYPE_CHECKING:
    from chat_history.store.engine import sqlite3


class PostgresStore(PurgeSteps, WritePath[Connection]):
    """The history in one PostgreSQL database, one connection to it, and what that connection
    remembers (the cache of whole conversations, the tails of recent ones)."""

    def __init__(
        self,
        url: str,
        *,
        cache_conversations: int = 64,
        cache_rows: int = 50_000,
        purge_seconds: float = PURGE_SECONDS,
    ) -> None:
        self.url = url
        self.purging = Purge(url, purge_seconds)
        self.link = Link(url, self.data_version, self._forget)
        self._lock = threading.RLock()
        self.cache = ConversationCache(cache_conversations, cache_rows)
        self.observer: WriteObserver | None = None
        self.watching: Callable[[], str] | None = None  # the watched workspace (seam, folded)
        self._tails = Tails()
        self._ratios = calibration.RatioMemo()
        #: the counter this connection's memory agrees with, the local version (what ``PRAGMA
        #: data_version`` answers) and the change marks that keep the memory in step (marks)
        self.looks = Looks(self.cache, self._tails)
        #: inside a section ``data_version`` answers the value its look read as it began,
        #: without a statement (a write's own conversations cannot change under its locks; a
        #: commit of others in between is found at its commit, ``_commit_write``; in a read
        #: section what is read after the look is at least as new as it, so what is remembered
        #: under it is only read again sooner)
        self._pinned = False
        self._secrets: dict[str, bytes] = {}
        #: the running write's token and the backend that holds it (``_begin_locked``)
        self._token: tuple[bytes, int] | None = None

    @property
    def path(self) -> str:
        """Where the history is, for messages (never holds a password: it was refused)."""
        return self.url

    # -- sections -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[Reading]:
        with self._lock:
            connection = self.link.start(self._check_version)
            try:
                yield self._reading(PostgresReading, connection)
            except Exception as exc:
                if is_database_error(exc):
                    raise self.link.failure(exc) from exc
                raise
            finally:
                self._pinned = False

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Reading]:
        """A read section in one REPEATABLE READ transaction: every query sees one commit."""
        with self._lock:
            connection = self.link.start(self._begin_snapshot)
            self._tails.transactions += 1
            try:
                yield self._reading(PostgresReading, connection)
                connection.raw.execute("COMMIT")
            except BaseException as exc:
                rollback(connection)
                if isinstance(exc, Exception) and is_database_error(exc):
                    raise self.link.failure(exc) from exc
                raise
            finally:
                self._pinned = False
                self._tails.transactions += 1

    def _reading(self, kind: type[Reading], connection: Connection) -> Reading:
        raw = cast("sqlite3.Connection", connection)
        reading = kind(raw, self.cache, self._tails, self._ratios)
        if isinstance(reading, PostgresReading):
            reading.marks, reading.folded = self.looks.marks, self.looks.folded
        return reading

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (store.keys), read once per connection."""
        with self._lock:
            found = self._secrets.get(name)
            if found is None:
                connection = self.link.start(self._look)
                try:
                    found = keys.secret(cast("sqlite3.Connection", connection), name)
                except Exception as exc:
                    if is_database_error(exc):
                        raise self.link.failure(exc) from exc
                    raise StorageError(str(exc)) from exc
                self._secrets[name] = found
            return found

    # -- the write section's steps (commit.WritePath.write) ------------------------------------

    def _begin_write(self, keys: Collection[Key]) -> Connection:
        """Begin under the locks of the conversations ``keys`` (none: the whole database)."""
        locks = sorted({conversation_lock(key) for key in keys})
        return self.link.start(lambda c: self._begin_locked(c, locks))

    def _transaction(self, connection: Connection) -> Transaction:
        return cast(Transaction, self._reading(PostgresTransaction, connection))

    def _commit_write(self, connection: Connection, transaction: Transaction) -> None:
        """Bump the role's counter and commit, in one round trip; a write that changed
        conversations stamps their change marks with the bumped value first (store.changes:
        under the counter's row lock, so stamps follow commit order), one round trip more. A
        connection lost there leaves the outcome unknown to this side: the write's token tells
        (``tokens``); one that committed returns as committed, one that did not raises (1002)."""
        import psycopg

        touched, gone = transaction.touched, transaction.gone
        try:
            if touched or gone:  # the marks of ``gone`` deleted (counter.py)
                row = connection.raw.execute(*commit_statement(touched, gone)).fetchone()
                connection.raw.execute("COMMIT")
            else:
                row = connection.raw.execute(f"{BUMP}; COMMIT").fetchone()
        except psycopg.OperationalError as exc:
            if not (connection.raw.broken or connection.raw.closed) or self._token is None:
                raise
            if not tokens.settle(lambda: self.link.open().raw, self.link.close, *self._token, exc):
                raise
            return
        self.looks.committed(int(row[0]) if row else 0, touched, bool(gone))

    def _rollback(self, connection: Connection) -> None:
        rollback(connection)

    def _forget(self) -> None:
        self.cache.clear()
        self.cache.version = None
        self._tails.clear()
        self._tails.writes += 1  # what was remembered is gone: no revision read before matches
        self._ratios.clear()
        self.looks.forget()

    def _storage_error(self, exc: BaseException) -> StorageError | None:
        if isinstance(exc, Exception) and is_database_error(exc):
            return self.link.failure(exc)
        return None

    def _section_ended(self) -> None:
        self._pinned = False

    # -- the look at the others' commits (marks) ------------------------------------------------

    def data_version(self) -> int:
        """Moves when another connection committed since this one last looked."""
        if not self._pinned:
            assert self.link.connection is not None
            self._look(self.link.connection)
        return self.looks.local_version

    def _check_version(self, connection: Connection) -> None:
        watched = self.watching() if self.watching else None
        self._look(connection, fold=watched if self.looks.folds(watched) else None)
        self._pinned = True

    def _look(self, connection: Connection, before: str = "", fold: str | None = None) -> None:
        """The look (marks.Looks) after ``before``, or with ``fold``'s marked ones (folded)."""
        if fold is not None:
            cursor = connection.raw.execute(self.looks.statement(fold=True), (fold,))
        else:
            cursor = connection.raw.execute(before + self.looks.statement())
            while cursor.nextset():
                pass
        self.looks.take(cursor.fetchone())

    def _begin_snapshot(self, connection: Connection) -> None:
        # REPEATABLE READ: the look, the first query, is the snapshot's.
        self._look(connection, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ")
        self._pinned = True

    def _begin_locked(self, connection: Connection, locks: list[int]) -> None:
        # One round trip: begin, the locks in their one order, the write's token (committed with
        # it: its backend's row of write_tokens), then the look (read after the locks: every
        # earlier writer of these conversations has committed and bumped it; marks) and the
        # backend.
        taken = lock_statements(locks)
        token = secrets.token_bytes(16)
        taken.append(tokens.statement(token))
        look = self.looks.statement(", pg_backend_pid()")
        cursor = connection.raw.execute(f"BEGIN; {'; '.join(taken)}; {look}")
        while cursor.nextset():
            pass
        row = cursor.fetchone()
        assert row is not None  # the look always answers one row
        self.looks.take(row, extra=1)
        self._token = (token, int(row[3]))  # after the version, the counter and its floor
        self._pinned = True

    # -- closing --------------------------------------------------------------------------------

    def close(self) -> None:
        self.purging.close()
        with self._lock:
            self.link.close()

    def close_after_migrating(self) -> None:
        """Open (migrating the schema) and close: set a database up."""
        with self._lock:
            self.link.open()
            self.link.close()
