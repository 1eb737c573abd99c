"""The manager's seam to the store: what an engine must offer (``HistoryStore``). Two engines
implement it: ``store.connection.Store`` (SQLite, the default: one file in the storage folder)
and ``store.postgres.PostgresStore`` (a PostgreSQL database shared by machines and people).

Both hand out the same ``Reading`` (a read section: ``read()`` sees each query's own commit,
``snapshot()`` one commit throughout) and ``Transaction`` (``write()``: one atomic write, rolled
back whole when anything inside raises, so a failed operation changes nothing), whose methods are
every query and change an operation makes; each engine runs them in its own dialect. Failures of
the engine surface as ``StorageError`` (1002).

``purge_deleted()`` runs after every operation that deleted or replaced text: the engine's own
step that takes the old bytes out of its files (SQLite: the WAL checkpoint-and-truncate, at once;
PostgreSQL: a table rewrite within its purge interval). It never raises. ``reset_wal`` is its
older name, which the manager still calls."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from chat_history.store.cache import ConversationCache
from chat_history.store.connection import WriteObserver
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

    def write(self) -> AbstractContextManager[Transaction]: ...

    def purge_deleted(self) -> bool: ...

    def purge_now(self) -> bool:
        """The purge at once (the CLI's ``purge``); returns whether it finished."""
        ...

    def reset_wal(self) -> bool: ...

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (store.keys)."""
        ...

    def close(self) -> None: ...
