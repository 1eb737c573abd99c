"""The store's one connection to PostgreSQL: opened with its bounds (autocommit, no server-side
prepared statements, ``statement_timeout``, ``lock_timeout``, a connect timeout), the schema
migrated on it, and what the store reads of psycopg's results and errors."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from chat_history.errors import StorageError
from chat_history.store.postgres import schema
from chat_history.store.postgres.dialect import register_types

if TYPE_CHECKING:
    import psycopg

#: SQLSTATEs of a transaction the database aborted that may succeed when run again: a deadlock
#: was broken, a serialization failure.
RETRIED_STATES = frozenset({"40P01", "40001"})
#: Bounds of one statement and of a wait for a lock (the busy timeout's part on SQLite).
STATEMENT_TIMEOUT_MS = 30_000
LOCK_TIMEOUT_MS = 5_000
CONNECT_TIMEOUT_S = 5

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
