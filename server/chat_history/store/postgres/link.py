"""The store's one connection to PostgreSQL (``Link``): opened lazily with its bounds (autocommit,
no server-side prepared statements, ``statement_timeout``, ``lock_timeout``, a connect timeout),
the schema migrated on it, opened again when lost, and what the store reads of psycopg's results
and errors."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chat_history.errors import StorageError, WriteConflict
from chat_history.store.postgres import schema
from chat_history.store.postgres.dialect import Connection, register_types

if TYPE_CHECKING:
    import psycopg

#: SQLSTATEs of a transaction the database aborted that may succeed when run again: a deadlock
#: was broken, a serialization failure.
RETRIED_STATES = frozenset({"40P01", "40001"})
#: Bounds of one statement and of a wait for a lock (the busy timeout's part on SQLite).
STATEMENT_TIMEOUT_MS = 30_000
LOCK_TIMEOUT_MS = 5_000
CONNECT_TIMEOUT_S = 5

log = logging.getLogger("chat_history")

#: When a connect to each URL last ran out of time (monotonic seconds): another connect to it
#: within CONNECT_TIMEOUT_S fails at once, so that a request (and the change watch before it)
#: that reaches for a database that does not answer waits the timeout once, not once for each
#: attempt it makes. A refused connection (nothing listening, no socket) is quick and not kept.
_timed_out: dict[str, float] = {}
_timed_out_lock = threading.Lock()


def connect(url: str) -> psycopg.Connection[Any]:
    """A new connection to ``url`` with the store's bounds, its schema current; StorageError
    when it cannot be had (the reason, never a parameter)."""
    import psycopg

    with _timed_out_lock:
        last = _timed_out.get(url)
    if last is not None and time.monotonic() - last < CONNECT_TIMEOUT_S:
        raise StorageError(
            "cannot connect to the database: connection timeout expired "
            f"(the last attempt, {time.monotonic() - last:.1f} s ago)"
        )
    try:
        raw = psycopg.connect(
            url,
            autocommit=True,
            prepare_threshold=None,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name="chat-history-server",
        )
    except Exception as exc:
        if isinstance(exc, psycopg.errors.ConnectionTimeout):
            with _timed_out_lock:
                _timed_out[url] = time.monotonic()
        raise StorageError(f"cannot connect to the database: {reason(exc)}") from exc
    with _timed_out_lock:
        _timed_out.pop(url, None)
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
        raise StorageError(f"cannot use the database: {reason(exc)}") from exc
    return raw


def reason(exc: Exception) -> str:
    """A readable reason from a psycopg error (its first line; never a parameter)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def last_value(cursor: Any) -> int:
    """The first column of the last result of a multi-statement execute."""
    while cursor.nextset():
        pass
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def is_database_error(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)


def rollback(connection: Connection) -> None:
    """Roll back the open transaction, if any; never raises (the connection may be gone)."""
    with contextlib.suppress(Exception):
        connection.raw.execute("ROLLBACK")


class Link:
    """The store's one connection, opened on first use (a database that cannot be reached
    answers 1002 per request while the server stays up). A lost connection (the server
    restarted, the network dropped) is closed, and the next section connects again. ``lost`` is
    told whenever one opens or closes: what the store remembered agrees with no new one."""

    def __init__(self, url: str, data_version: Callable[[], int], lost: Callable[[], None]):
        self.url = url
        self.raw: psycopg.Connection[Any] | None = None
        self.connection: Connection | None = None
        self._data_version = data_version  # what ``PRAGMA data_version`` answers (dialect)
        self._lost = lost

    def open(self) -> Connection:
        if self.connection is not None:
            return self.connection
        raw = connect(self.url)
        self.raw = raw
        self.connection = Connection(raw, self._data_version)
        self._lost()
        return self.connection

    def start(self, first: Callable[[Connection], object]) -> Connection:
        """The connection, after a section's first statement ran on it. A connection the
        database server dropped since the last request (a restart, a network cut) is noticed
        here, before anything of the operation ran: it is opened again and the statement
        retried once. Any other failure is 1002."""
        import psycopg

        connection = self.open()
        try:
            first(connection)
            return connection
        except psycopg.OperationalError as exc:
            if not (connection.raw.broken or connection.raw.closed):
                rollback(connection)
                raise self.failure(exc) from exc
            log.warning("the database connection was lost (%s); connecting again", reason(exc))
            self.close()
        except psycopg.Error as exc:
            rollback(connection)
            raise self.failure(exc) from exc
        connection = self.open()
        try:
            first(connection)
        except psycopg.Error as exc:
            rollback(connection)
            raise self.failure(exc) from exc
        return connection

    def failure(self, exc: Exception) -> StorageError:
        """The StorageError for a database error (a lost connection is closed: the next request
        connects again); ``WriteConflict`` for a write aborted to break a deadlock or a
        serialization failure on a connection still open."""
        import psycopg

        broken = self.raw is None or self.raw.closed or self.raw.broken
        if getattr(exc, "sqlstate", None) in RETRIED_STATES and not broken:
            return WriteConflict(reason(exc))
        if isinstance(exc, psycopg.OperationalError) or (self.raw is not None and self.raw.closed):
            self.close()
        return StorageError(reason(exc))

    def close(self) -> None:
        if self.raw is not None:
            with contextlib.suppress(Exception):
                self.raw.close()
        self.raw = None
        self.connection = None
        self._lost()
