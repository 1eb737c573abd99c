"""What SQLite's failures mean to a user: how long a lock is waited for, and the readable reason
a StorageError carries. (Read as ``failures.BUSY_TIMEOUT_MS`` at each use, so a test process can
shorten it.)"""

from __future__ import annotations

from chat_history.store.engine import sqlite3

BUSY_TIMEOUT_MS = 15_000
#: SQLITE_CORRUPT and SQLITE_NOTADB, the primary result codes of a damaged file.
DAMAGED = (11, 26)
#: SQLITE_READONLY and SQLITE_CANTOPEN.
UNWRITABLE = (8, 14)


def reason(exc: BaseException) -> str:
    """``exc`` as a user reads it; a lock names how long it was waited for."""
    text = str(exc) or type(exc).__name__
    if sqlite3.is_locked(exc):
        return f"{text} (still locked after {BUSY_TIMEOUT_MS} ms)"
    return text


def primary_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of ``exc`` (0 when it has none)."""
    return sqlite3.primary_code(exc)
