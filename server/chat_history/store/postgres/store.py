"""``PostgresStore``: the store on a PostgreSQL ≥ 14 database (protocol.md "Version 3" → Storage
engines), with the same sections as the SQLite store (``read``, ``snapshot``, ``write``,
``purge_deleted``, ``close``) handing out the same ``Reading``/``Transaction`` over the shared
SQL (``dialect``).

- **Connection.** Opened lazily on the first request (a database that cannot be reached answers
  1002 per request while the server stays up); psycopg 3, autocommit (the sections begin and end
  their transactions), no server-side prepared statements (safe behind PgBouncer's transaction
  pooling), ``statement_timeout`` and ``lock_timeout`` bound every statement. A lost connection
  (the server restarted, the network dropped) fails the request in flight with 1002 (its
  transaction never committed: nothing changed) and the next request connects again; what the
  connection remembered (cache, tails, ratios) is dropped.
- **Writes.** Every write transaction names the conversations it changes (``write(keys)``) and
  locks them first, so the shared read-modify-write code (totals, turn numbers, retention) never
  interleaves with another process's on one conversation (a lost update without it:
  server-database.md §3.6), while writers of other conversations run beside it. The locks are
  transaction-level advisory locks in one order: ``GLOBAL_LOCK`` shared, then each
  conversation's own key (``conversation_lock``: 64 bits of a hash of workspace and
  conversation) in ascending order. A write without keys (it spans workspaces, or changes rows
  every conversation shares: calibration, folder records, fork's block of row ids) takes
  ``GLOBAL_LOCK`` exclusively: it waits for every writer and every writer waits for it. Advisory
  locks taken in one order never wait in a cycle; the only row two writers of different
  conversations both change is the version counter, updated last, just before the commit. A
  deadlock with something else (an operator's session holding a row lock, say) or a
  serialization failure aborts the write whole: it raises ``WriteConflict`` after rolling back
  and forgetting what the connection remembered, and ``seam.write_retried`` runs it again.
  Waiting past ``lock_timeout`` answers 1002 and changes nothing.
- **Coherence.** ``store_version`` counts committed writes; every write bumps it just before it
  commits. A write that reads the counter after its locks and finds it one below its own bump
  saw every commit before its own; else another writer (of another conversation) committed in
  between, and what this connection remembers is dropped.
  ``data_version`` (what SQLite's ``PRAGMA data_version`` is to the shared code) changes when the
  counter moved by another connection's commit since this connection last looked, so the cache
  and the remembered tails are dropped exactly when another process wrote.
- **Purge.** A ``DELETE`` is gone from every read and search at once. The bytes stay in dead
  tuples and in the trigram index until the table is rewritten: ``purge_deleted`` (called after
  every deleting operation) schedules ``purge_now`` within ``purge_seconds``, which runs
  ``VACUUM FULL`` on the tables of history (a rewrite into new files, indexes rebuilt; the old
  files are truncated at its commit) on its own connection, logging one audit line with counts,
  never content. It needs the tables' owner (or a superuser); a role that is not is told once in
  the log, and the operator runs ``chat-history purge`` as the owner on a schedule. The
  write-ahead log and backups keep old pages until the operator's retention recycles them
  (docs/server-database.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, cast

from chat_history.errors import StorageError, WriteConflict
from chat_history.model import Key
from chat_history.policy.search import SearchQuery
from chat_history.policy.search_rank import SearchRow, SearchScope
from chat_history.store import calibration, keys
from chat_history.store.connection import WriteObserver
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.postgres import schema, search
from chat_history.store.postgres.dialect import Connection, register_types
from chat_history.store.tail import Tails
from chat_history.store.transaction import Reading, Transaction, sync_cache

if TYPE_CHECKING:
    import psycopg

    from chat_history.store.engine import sqlite3

log = logging.getLogger("chat_history")

#: pg_advisory_xact_lock key of the whole database ('chwr'): every write holds it, shared when
#: it names its conversations, else exclusive.
GLOBAL_LOCK = 0x63687772
#: SQLSTATEs of a transaction the database aborted that may succeed when run again: a deadlock
#: was broken, a serialization failure.
RETRIED_STATES = frozenset({"40P01", "40001"})
#: Bounds of one statement and of a wait for a lock (the busy timeout's part on SQLite).
STATEMENT_TIMEOUT_MS = 30_000
LOCK_TIMEOUT_MS = 5_000
CONNECT_TIMEOUT_S = 5
#: The default purge interval (``purgeSeconds``, ``CHAT_HISTORY_PURGE_SECONDS``).
PURGE_SECONDS = 600.0
#: Tables a purge rewrites: every one that holds text of the history.
PURGED_TABLES = ("messages", "summaries", "conversations", "replies", "reply_parts")


class PostgresReading(Reading):
    """``Reading`` whose search is PostgreSQL's (``search``); nothing waits to be indexed."""

    def search_backlog(self) -> bool:
        return False

    def search_best(self, scope: SearchScope, query: SearchQuery, count: int) -> list[SearchRow]:
        return search.best_rows(_raw(self), scope, query, count)


class PostgresTransaction(PostgresReading, Transaction):
    def index_for_search(self) -> int:
        return 0


def _raw(reading: Reading) -> psycopg.Connection[Any]:
    return cast(Connection, reading.connection).raw


def _reason(exc: Exception) -> str:
    """A readable reason from a psycopg error (its first line; never a parameter)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class PostgresStore:
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
        self.purge_seconds = purge_seconds
        self._raw: psycopg.Connection[Any] | None = None
        self._connection: Connection | None = None
        self._lock = threading.RLock()
        self.cache = ConversationCache(cache_conversations, cache_rows)
        self.observer: WriteObserver | None = None
        self._tails = Tails()
        self._ratios = calibration.RatioMemo()
        #: the counter's value this connection's memory agrees with, and the local version
        #: (what ``PRAGMA data_version`` answers): it moves when the counter moved by others
        self._seen: int | None = None
        self._local_version = 0
        #: inside a write or a snapshot ``data_version`` answers the value read as it began,
        #: without a statement (a write's own conversations cannot change under its locks; a
        #: commit of others in between is found at its commit, ``_commit``); a read section's
        #: first check uses the value read as it began (one round trip fewer)
        self._pinned = False
        self._peeked = False
        self._secrets: dict[str, bytes] = {}
        self._purge_lock = threading.Lock()
        self._purge_timer: threading.Timer | None = None
        self._purge_refused = False
        #: purges done (audit counts, for tests and logs)
        self.purges = 0

    @property
    def path(self) -> str:
        """Where the history is, for messages (never holds a password: it was refused)."""
        return self.url

    # -- sections -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[Reading]:
        with self._lock:
            connection = self._start(self._check_version)
            try:
                sync_cache(self.cache, cast("sqlite3.Connection", connection))
                yield self._reading(PostgresReading, connection)
            except Exception as exc:
                if _is_database_error(exc):
                    raise self._failure(exc) from exc
                raise

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Reading]:
        """A read section in one REPEATABLE READ transaction: every query sees one commit."""
        with self._lock:
            connection = self._start(self._begin_snapshot)
            self._tails.transactions += 1
            try:
                sync_cache(self.cache, cast("sqlite3.Connection", connection))
                yield self._reading(PostgresReading, connection)
                connection.raw.execute("COMMIT")
            except BaseException as exc:
                self._rollback(connection)
                if isinstance(exc, Exception) and _is_database_error(exc):
                    raise self._failure(exc) from exc
                raise
            finally:
                self._pinned = False
                self._tails.transactions += 1

    @contextlib.contextmanager
    def write(self, keys: Collection[Key] = ()) -> Iterator[Transaction]:
        """One write transaction under the locks of the conversations ``keys`` (none: the whole
        database). Whatever raises inside rolls it all back: the operation changes nothing, and
        what this connection remembers is dropped. A deadlock or serialization failure raises
        ``WriteConflict`` (``seam.write_retried`` runs the write again)."""
        locks = sorted({conversation_lock(key) for key in keys})
        with self._lock:
            connection = self._start(lambda c: self._begin_write(c, locks))
            self._tails.transactions += 1
            self._tails.writes += 1  # Reading.revision: this connection's own writes
            try:
                sync_cache(self.cache, cast("sqlite3.Connection", connection))
                transaction = cast(Transaction, self._reading(PostgresTransaction, connection))
                if self.observer is not None:
                    self.observer.before_write(transaction)
                yield transaction
                if self.observer is not None:
                    self.observer.after_write(transaction)
                self._commit(connection)
            except BaseException as exc:
                self._rollback(connection)
                if self.observer is not None:
                    self.observer.write_failed()
                self._forget()
                if isinstance(exc, Exception) and _is_database_error(exc):
                    raise self._failure(exc) from exc
                raise
            finally:
                self._pinned = False
                self._tails.transactions += 1

    def _start(self, first: Callable[[Connection], object]) -> Connection:
        """The connection, after the section's first statement ran on it. A connection the
        database server dropped since the last request (a restart, a network cut) is noticed
        here, before anything of the operation ran: it is opened again and the statement
        retried once. Any other failure is 1002."""
        import psycopg

        connection = self._open()
        try:
            first(connection)
            return connection
        except psycopg.OperationalError as exc:
            if not (connection.raw.broken or connection.raw.closed):
                self._rollback(connection)
                raise self._failure(exc) from exc
            log.warning("the database connection was lost (%s); connecting again", _reason(exc))
            self._close_connection()
        except psycopg.Error as exc:
            self._rollback(connection)
            raise self._failure(exc) from exc
        connection = self._open()
        try:
            first(connection)
        except psycopg.Error as exc:
            self._rollback(connection)
            raise self._failure(exc) from exc
        return connection

    def _check_version(self, connection: Connection) -> None:
        self._pinned = False
        self._observe(_last_value(connection.raw.execute(_VERSION)))
        self._peeked = True

    def _begin_snapshot(self, connection: Connection) -> None:
        # REPEATABLE READ: the version read with the first query is the snapshot's.
        cursor = connection.raw.execute(
            f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {_VERSION}"
        )
        self._observe(_last_value(cursor))
        self._pinned = True

    def _begin_write(self, connection: Connection, locks: list[int]) -> None:
        # One round trip: begin, the locks in their one order, then the version (read after
        # them: every earlier writer of these conversations has committed and bumped it).
        if locks:
            taken = [f"SELECT pg_advisory_xact_lock_shared({GLOBAL_LOCK})"]
            taken += [f"SELECT pg_advisory_xact_lock({lock})" for lock in locks]
        else:
            taken = [f"SELECT pg_advisory_xact_lock({GLOBAL_LOCK})"]
        cursor = connection.raw.execute(f"BEGIN; {'; '.join(taken)}; {_VERSION}")
        self._observe(_last_value(cursor))
        self._pinned = True

    def _reading(self, kind: type[Reading], connection: Connection) -> Reading:
        return kind(cast("sqlite3.Connection", connection), self.cache, self._tails, self._ratios)

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (store.keys), read once per connection."""
        with self._lock:
            found = self._secrets.get(name)
            if found is None:
                connection = self._start(self._check_version)
                try:
                    found = keys.secret(cast("sqlite3.Connection", connection), name)
                except Exception as exc:
                    if _is_database_error(exc):
                        raise self._failure(exc) from exc
                    raise StorageError(str(exc)) from exc
                self._secrets[name] = found
            return found

    # -- coherence ------------------------------------------------------------------------------

    def data_version(self) -> int:
        """Moves when another connection committed since this one last looked."""
        if self._pinned:
            return self._local_version
        if self._peeked:
            self._peeked = False
            return self._local_version
        assert self._raw is not None
        self._observe(_last_value(self._raw.execute(_VERSION)))
        return self._local_version

    def _observe(self, version: int) -> None:
        if version != self._seen:
            self._seen = version
            self._local_version += 1

    def _commit(self, connection: Connection) -> None:
        """Bump the counter and commit, in one round trip."""
        cursor = connection.raw.execute(
            "UPDATE store_version SET version = version + 1 RETURNING version; COMMIT"
        )
        row = cursor.fetchone()
        version = int(row[0]) if row else 0
        if self._seen is None or version - 1 != self._seen:
            self._local_version += 1  # another commit came between: what is remembered goes
        self._seen = version

    # -- purge ----------------------------------------------------------------------------------

    def purge_deleted(self) -> bool:
        """After an operation deleted or replaced text: the physical purge runs within
        ``purge_seconds`` (at once when 0). Never raises. Returns whether it ran now."""
        if self.purge_seconds <= 0:
            return self.purge_now()
        with self._purge_lock:
            if self._purge_timer is None:
                timer = threading.Timer(self.purge_seconds, self._timed_purge)
                timer.daemon = True
                self._purge_timer = timer
                timer.start()
        return False

    #: The SQLite store's name of the same step, which the manager calls.
    reset_wal = purge_deleted

    def _timed_purge(self) -> None:
        with self._purge_lock:
            self._purge_timer = None
        if not self.purge_now():
            self.purge_deleted()  # try again at the next interval

    def purge_now(self) -> bool:
        """Rewrite the tables of history (``VACUUM FULL``: dead tuples and index entries of
        deleted text leave the files) on a connection of its own; logs an audit line. Returns
        whether it finished."""
        import psycopg

        started = time.monotonic()
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            ) as raw:
                raw.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
                owned = raw.execute(
                    "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                    "WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND (r.rolname = current_user "
                    "OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))",
                    (list(PURGED_TABLES),),
                ).fetchone()
                if not owned or int(owned[0]) < len(PURGED_TABLES):
                    if not self._purge_refused:
                        log.warning(
                            "the purge of deleted text needs the owner of the history tables: "
                            "run `chat-history purge --database ...` as that role on a schedule"
                        )
                        self._purge_refused = True
                    return False
                dead = raw.execute(
                    "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
                    "WHERE relname = ANY(%s)",
                    (list(PURGED_TABLES),),
                ).fetchone()
                raw.execute(f"VACUUM FULL {', '.join(PURGED_TABLES)}")
        except Exception as exc:
            log.warning("the purge of deleted text did not finish (%s); retried", _reason(exc))
            return False
        self.purges += 1
        log.info(
            "purge: rewrote %s (about %s dead rows) in %.2f s",
            ", ".join(PURGED_TABLES),
            dead[0] if dead else "?",
            time.monotonic() - started,
        )
        return True

    def close(self) -> None:
        with self._purge_lock:
            timer, self._purge_timer = self._purge_timer, None
        if timer is not None:
            timer.cancel()
            self.purge_now()  # a pending purge gets its last try
        with self._lock:
            self._close_connection()

    def close_after_migrating(self) -> None:
        """Open (migrating the schema) and close: set a database up."""
        with self._lock:
            self._open()
            self._close_connection()

    # -- the connection -------------------------------------------------------------------------

    def _open(self) -> Connection:
        if self._connection is not None:
            return self._connection
        import psycopg

        try:
            raw = psycopg.connect(
                self.url,
                autocommit=True,
                prepare_threshold=None,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="chat-history-server",
            )
        except Exception as exc:
            raise StorageError(f"cannot connect to the database: {_reason(exc)}") from exc
        try:
            register_types(raw)
            raw.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            raw.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
            schema.migrate(raw)
        except schema.NewerSchema as exc:
            raw.close()
            raise StorageError(str(exc)) from exc
        except Exception as exc:
            raw.close()
            raise StorageError(f"cannot use the database: {_reason(exc)}") from exc
        self._raw = raw
        self._connection = Connection(raw, self.data_version)
        self._forget()
        return self._connection

    def _forget(self) -> None:
        self.cache.clear()
        self.cache.version = None
        self._tails.clear()
        self._tails.writes += 1  # what was remembered is gone: no revision read before matches
        self._ratios.clear()
        self._seen = None
        self._local_version += 1

    def _rollback(self, connection: Connection) -> None:
        with contextlib.suppress(Exception):
            connection.raw.execute("ROLLBACK")

    def _failure(self, exc: Exception) -> StorageError:
        """The StorageError for a database error (a lost connection is closed: the next request
        connects again)."""
        import psycopg

        broken = self._raw is None or self._raw.closed or self._raw.broken
        if getattr(exc, "sqlstate", None) in RETRIED_STATES and not broken:
            return WriteConflict(_reason(exc))
        if isinstance(exc, psycopg.OperationalError) or (
            self._raw is not None and self._raw.closed
        ):
            self._close_connection()
        return StorageError(_reason(exc))

    def _close_connection(self) -> None:
        if self._raw is not None:
            with contextlib.suppress(Exception):
                self._raw.close()
        self._raw = None
        self._connection = None
        self._forget()


_VERSION = "SELECT version FROM store_version"


def conversation_lock(key: Key) -> int:
    """The advisory lock key of one conversation: the first 64 bits (signed, as ``bigint``) of
    a BLAKE2b hash of its workspace and id, the same in every process and on every machine. Two
    conversations sharing one only wait for each other."""
    text = f"{len(key.workspace)}:{key.workspace}:{key.conversation}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _last_value(cursor: Any) -> int:
    """The first column of the last result of a multi-statement execute."""
    while cursor.nextset():
        pass
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _is_database_error(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)
