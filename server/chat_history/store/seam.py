"""The manager's seam to the store: what an engine must offer (``HistoryStore``). Two engines
implement it: ``store.connection.Store`` (SQLite, the default: one file in the storage folder)
and ``store.postgres.PostgresStore`` (a PostgreSQL database shared by machines and people).

Both hand out the same ``Reading`` (a read section: ``read()`` sees each query's own commit,
``snapshot()`` one commit throughout) and ``Transaction`` (``write()``: one atomic write, rolled
back whole when anything inside raises, so a failed operation changes nothing), whose methods are
every query and change an operation makes; each engine runs them in its own dialect. Failures of
the engine surface as ``StorageError`` (1002).

``write(keys)`` names the conversations the write changes. SQLite ignores them (``BEGIN
IMMEDIATE``: one writer of the whole file). PostgreSQL locks each of them, in one order, beside
the other writers of other conversations; a write without keys (one that spans workspaces, or
changes rows every conversation shares: calibration, workspace records, a block of row ids)
locks the whole database. A write that the database aborts to break a deadlock raises
``WriteConflict``: ``write_retried`` is the one place that runs a write section, and runs it
again then (its body must change nothing but the transaction, so running it twice is safe).

``purge_deleted()`` runs after every operation that deleted or replaced text: the engine's own
step that takes the old bytes out of its files (SQLite: the WAL checkpoint-and-truncate, at once;
PostgreSQL: a table rewrite within its purge interval). It never raises. ``reset_wal`` is its
older name, which the manager still calls."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

from chat_history.errors import WriteConflict
from chat_history.model import Key
from chat_history.store.connection import WriteObserver
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.transaction import Reading, Transaction


class HistoryStore(Protocol):
    #: the remembered whole conversations (tests and stats look at it)
    cache: ConversationCache
    #: told of each write transaction at its start and before its commit (watch.ChangeWatch)
    observer: WriteObserver | None

    @property
    def path(self) -> Path | str:
        """Where the history is, for messages: the SQLite file, or the database URL."""
        ...

    def read(self) -> AbstractContextManager[Reading]: ...

    def snapshot(self) -> AbstractContextManager[Reading]: ...

    def write(self, keys: Collection[Key] = ()) -> AbstractContextManager[Transaction]:
        """One write transaction changing the conversations ``keys`` (none: anything)."""
        ...

    def purge_deleted(self) -> bool: ...

    def purge_now(self) -> bool:
        """The purge at once (the CLI's ``purge``); returns whether it finished."""
        ...

    def reset_wal(self) -> bool: ...

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (store.keys)."""
        ...

    def close(self) -> None: ...


T = TypeVar("T")
#: How often a write the database aborted (``WriteConflict``) is run, in all.
WRITE_ATTEMPTS = 6
#: The longest pause before the last attempt (each is up to twice the one before, random).
_LONGEST_PAUSE_S = 0.4


def write_retried(
    store: HistoryStore, keys: Collection[Key], body: Callable[[Transaction], T]
) -> T:
    """``body`` in one write transaction of ``store`` that changes the conversations ``keys``
    (none: anything; it takes the whole database), returning what it returns. A write the
    database aborted to break a deadlock or a serialization failure changed nothing: it runs
    again, after a short random pause, up to ``WRITE_ATTEMPTS`` times in all.

    A write with keys that changed another conversation is a bug that could lose an update on
    PostgreSQL: it raises (on both engines, so either engine's tests find it) and changes
    nothing."""
    named = frozenset(keys)
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            with store.write(named) as tx:
                result = body(tx)
                if named and not tx.touched <= named:
                    raise RuntimeError(
                        f"a write locked {sorted(named, key=str)} but changed "
                        f"{sorted(tx.touched - named, key=str)}"
                    )
                return result
        except WriteConflict:
            if attempt == WRITE_ATTEMPTS:
                raise
            pause = _LONGEST_PAUSE_S / 2 ** (WRITE_ATTEMPTS - 1 - attempt)
            time.sleep(random.uniform(pause / 2, pause))
    raise AssertionError("unreachable")  # pragma: no cover
