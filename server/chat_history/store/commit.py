"""The write section of every engine, written once (``WritePath.write``; seam.HistoryStore.write
is its contract), and the write observer it tells. An engine supplies only its steps: begin under
the write's locks, its ``Transaction``, the commit with its change marks, rollback, forget what
its connection remembers, its failures as ``StorageError``, and its purge of deleted text."""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator
from typing import Generic, Protocol, TypeVar

from chat_history.errors import StorageError
from chat_history.model import Key
from chat_history.store.tail import Tails
from chat_history.store.transaction import Transaction


class WriteObserver(Protocol):
    """Told of each write transaction: at its start, when the others' commits are settled (it
    holds the write lock), before its commit, when it has made its changes, and when it rolled
    back after all (then what ``after_write`` saw never happened)."""

    def before_write(self, transaction: Transaction) -> None: ...

    def after_write(self, transaction: Transaction) -> None: ...

    def write_failed(self) -> None: ...


C = TypeVar("C")


class WritePath(ABC, Generic[C]):
    """The write section over an engine's connection type ``C``. The engine holds ``_lock`` (its
    re-entrant lock of sections), ``_tails`` (whose count of transactions marks a section open)
    and ``observer``, and implements the abstract steps; ``write`` runs them in the one order:

    begin (locks, the look at the others' commits) → its ``Transaction`` → ``before_write`` →
    the body → ``after_write`` → ``Transaction.before_commit`` (the gone conversations) → the
    commit with the change marks of ``touched`` and ``gone`` → the purge when ``removed_text``
    (else ``_after_operation``). Anything raised from the ``Transaction`` on: rollback →
    ``write_failed`` → forget → raised again, an engine failure as ``StorageError``."""

    observer: WriteObserver | None
    _lock: threading.RLock
    _tails: Tails

    @contextlib.contextmanager
    def write(self, keys: Collection[Key] = ()) -> Iterator[Transaction]:
        """One write transaction changing the conversations ``keys`` (seam.HistoryStore.write).
        Whatever raises inside rolls it all back: the operation changes nothing, and what this
        connection remembers is dropped. Deleted means deleted: a commit that removed text is
        purged before the section returns, never after a rollback (which removed nothing)."""
        with self._lock:
            connection = self._begin_write(keys)
            self._tails.transactions += 1
            self._tails.writes += 1  # Reading.revision: this connection's own writes
            try:
                transaction = self._transaction(connection)
                if self.observer is not None:
                    self.observer.before_write(transaction)
                yield transaction
                if self.observer is not None:
                    self.observer.after_write(transaction)
                transaction.before_commit()
                self._commit_write(connection, transaction)
            except BaseException as exc:
                self._rollback(connection)
                if self.observer is not None:
                    self.observer.write_failed()
                self._forget()
                failure = self._storage_error(exc)
                if failure is not None:
                    raise failure from exc
                raise
            finally:
                self._section_ended()
                self._tails.transactions += 1
            if transaction.removed_text:
                self.purge_deleted()
            else:
                self._after_operation()

    @abstractmethod
    def _begin_write(self, keys: Collection[Key]) -> C:
        """The connection, its write transaction begun under the locks of ``keys`` (none: the
        whole database). Raises ``StorageError`` with nothing left open."""

    @abstractmethod
    def _transaction(self, connection: C) -> Transaction:
        """The engine's ``Transaction`` on ``connection``, what it remembers of conversations
        others changed since it last looked dropped first."""

    @abstractmethod
    def _commit_write(self, connection: C, transaction: Transaction) -> None:
        """Stamp the change marks of ``transaction.touched`` (``changes``), delete those of
        ``transaction.gone``, and commit."""

    @abstractmethod
    def _rollback(self, connection: C) -> None:
        """Roll back the open transaction. Never raises (the connection may be gone)."""

    @abstractmethod
    def _forget(self) -> None:
        """Drop what the connection remembers (cache, tails, ratios): after a rollback, what
        they learned in the transaction never happened."""

    @abstractmethod
    def _storage_error(self, exc: BaseException) -> StorageError | None:
        """``exc`` as ``StorageError`` when it is the engine's failure (``WriteConflict`` for a
        write the database aborted that may succeed again); None for anything else, which
        passes through unchanged."""

    @abstractmethod
    def purge_deleted(self) -> bool:
        """The engine's purge of deleted text (seam.HistoryStore.purge_deleted)."""

    def _section_ended(self) -> None:
        """The section is over, committed or not (PostgreSQL's ``data_version`` unpins)."""

    def _after_operation(self) -> None:
        """After a commit that removed no text (SQLite retries a pending WAL reset)."""
