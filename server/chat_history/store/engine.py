"""The SQLite engine every connection of the store (server and CLI) uses: APSW, whose wheels
bundle a current SQLite (FTS5 compiled in) for every platform VS Code runs on — Windows, macOS
and Linux (glibc and musl), x64 and arm64, CPython 3.11 to 3.14. The search index needs FTS5's
``secure-delete`` (SQLite >= 3.42), without which it would keep pieces of deleted text in the
file; the stdlib module links whatever SQLite the machine has (3.40 on Debian 12, 3.40.1 in
python.org's Windows 3.11), and sqlean.py, used before, has no Windows wheels since 3.50, none
for Python 3.14 on Windows, and none for musl (issue 26 item 1).

APSW is not a DB-API module, so this module gives the store the small part of ``sqlite3``'s
interface it uses (connections in autocommit mode, ``execute`` returning a cursor, ``rowcount``,
``lastrowid``, ``fetchmany``, ``in_transaction``, ``complete_statement``) over it. Import it
from here only, as ``sqlite3``: its exceptions are APSW's (``Error`` is ``apsw.Error``), and
:func:`primary_code` reads their SQLite result code."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

import apsw

Bindings = Sequence[Any] | Mapping[str, Any]
Row = tuple[Any, ...]
Error = apsw.Error


class DatabaseError(apsw.Error):
    """The file is a database, but not as the store wrote it (raised by the store itself)."""


_CHANGING = ("insert", "update", "delete", "replace")
#: SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock.
_LOCK_CODES = (5, 6)

sqlite_version: str = apsw.sqlite_lib_version()
sqlite_version_info: tuple[int, ...] = tuple(int(part) for part in sqlite_version.split("."))


class Cursor:
    """The rows of one ``execute``: iterate, ``fetchone``/``fetchmany``/``fetchall``;
    ``rowcount`` is the rows an INSERT, UPDATE or DELETE changed (-1 for other statements)."""

    def __init__(self, raw: apsw.Cursor, rowcount: int, lastrowid: int) -> None:
        self._raw = raw
        self.rowcount = rowcount
        self.lastrowid: int | None = lastrowid

    def __iter__(self) -> Iterator[Row]:
        return iter(self._raw)

    def fetchone(self) -> Any:  # Row | None, typed as the stdlib module types it
        return self._raw.fetchone()

    def fetchall(self) -> list[Row]:
        return list(self._raw)

    def fetchmany(self, size: int) -> list[Row]:
        rows: list[Row] = []
        for row in self._raw:
            rows.append(row)
            if len(rows) >= size:
                break
        return rows

    def close(self) -> None:
        self._raw.close(force=True)


class Connection:
    """One database connection in autocommit mode: transactions are the store's own ``BEGIN``
    and ``COMMIT``."""

    def __init__(self, raw: apsw.Connection) -> None:
        self._raw = raw

    def execute(self, sql: str, parameters: Bindings = ()) -> Cursor:
        cursor = self._raw.execute(sql, parameters)
        return self._ran(sql, cursor)

    def executemany(self, sql: str, parameters: Iterable[Bindings]) -> Cursor:
        cursor = self._raw.executemany(sql, parameters)
        return self._ran(sql, cursor)

    def _ran(self, sql: str, cursor: apsw.Cursor) -> Cursor:
        changing = sql.lstrip().lower().startswith(_CHANGING)
        rowcount = self._raw.changes() if changing else -1
        return Cursor(cursor, rowcount, self._raw.last_insert_rowid())

    @property
    def in_transaction(self) -> bool:
        return not self._raw.get_autocommit()

    def close(self) -> None:
        self._raw.close(force=True)


def connect(
    database: str | PathLike[str],
    *,
    isolation_level: None = None,
    check_same_thread: bool = False,
    timeout: float = 5.0,
) -> Connection:
    """Open (creating when missing) ``database`` in autocommit mode (``isolation_level`` is
    always None; APSW connections may be used from any thread, one at a time), waiting up to
    ``timeout`` seconds on another connection's lock."""
    del isolation_level, check_same_thread
    raw = apsw.Connection(str(database))
    raw.set_busy_timeout(int(timeout * 1000))
    return Connection(raw)


def complete_statement(sql: str) -> bool:
    """Whether ``sql`` ends with a complete statement (semicolon included)."""
    return apsw.complete(sql)


def primary_code(exc: BaseException) -> int:
    """SQLite's primary result code of ``exc`` (0 when it has none)."""
    return int(getattr(exc, "result", 0) or 0) & 0xFF


def is_locked(exc: BaseException) -> bool:
    """``exc`` says another connection holds the lock (busy or locked)."""
    return isinstance(exc, apsw.Error) and primary_code(exc) in _LOCK_CODES


# The store imports this module as ``sqlite3`` (``from chat_history.store.engine import sqlite3``).
if TYPE_CHECKING:
    from chat_history.store import engine as sqlite3
else:
    sqlite3 = sys.modules[__name__]

__all__ = ["sqlite3"]
