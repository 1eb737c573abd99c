"""The store's connection: opened lazily (so a broken file answers StorageError per request while
the server stays up, and is retried on the next request), WAL, ``secure_delete``, a busy timeout,
read and snapshot sections that hand out a ``Reading``, SQLite's steps of the write section
(``commit.WritePath``: BEGIN IMMEDIATE, the change marks and COMMIT, ROLLBACK, the WAL reset
that purges), and SQLite failures mapped to StorageError. The file at the path is the
database: one deleted, moved away or replaced while open is noticed, and the file at the path
is opened instead."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from chat_history.errors import StorageError
from chat_history.model import Key
from chat_history.store import calibration, changes, failures, files, keys
from chat_history.store.commit import WriteObserver, WritePath
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.engine import sqlite3
from chat_history.store.schema import DATABASE_FILE, NewerSchema, check_version, migrate
from chat_history.store.tail import Tails
from chat_history.store.transaction import Reading, Transaction, sync_cache
from chat_history.store.wal import RESET_WAIT_MS, WalReset

log = logging.getLogger("chat_history")
_SIDECARS = files.SIDECARS


def _file_id(path: str | Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at ``path``; None when there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def _enable_wal(connection: sqlite3.Connection) -> None:
    """``journal_mode = WAL``, retried: on a file another process is creating at the same moment
    SQLite answers "database is locked" at once, without waiting on the busy handler."""
    give_up = time.monotonic() + failures.BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.Error as exc:
            if not sqlite3.is_locked(exc) or time.monotonic() > give_up:
                raise
            time.sleep(0.005)


class Store(WritePath[sqlite3.Connection]):
    """The database of one user, one connection to it, and what that connection remembers (the
    cache of whole conversations, the tails of recent ones)."""

    def __init__(
        self,
        folder: Path,
        *,
        file_name: str = DATABASE_FILE,
        cache_conversations: int = 64,
        cache_rows: int = 50_000,
    ):
        self.folder = folder
        self.path = folder / file_name
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        # (file identity, reason) once SQLite found the file corrupt: refused until replaced.
        self._damaged: tuple[tuple[int, ...] | None, str] | None = None
        self.cache = ConversationCache(cache_conversations, cache_rows)
        self._tails = Tails()
        self._ratios = calibration.RatioMemo()
        #: (st_dev, st_ino) of the file the connection opened: the path must still name it
        self._file: tuple[int, int] | None = None
        #: the same for its -wal and -shm (None: not there at the time)
        self._sidecars: dict[str, tuple[int, int] | None] = {}
        self._wal = WalReset(self.path, self._lock, self._idle_connection)
        #: told of every write transaction at its start and before its commit (the change
        #: watch, chat_history.service.watch); None: nobody watches (the CLI)
        self.observer: WriteObserver | None = None
        #: the watched workspace (seam.HistoryStore.watching; SQLite's refresh does not need it)
        self.watching: Callable[[], str] | None = None
        #: the database's keys (store.keys) read through the open connection
        self._secrets: dict[str, bytes] = {}

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (store.keys), read once per connection."""
        with self._lock:
            connection = self._open()
            found = self._secrets.get(name)
            if found is None:
                try:
                    found = keys.secret(connection, name)
                except sqlite3.Error as exc:
                    raise self._failure(exc) from exc
                self._secrets[name] = found
            return found

    # -- sections -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[Reading]:
        """A read section: drops the cache when another connection changed the file."""
        with self._lock:
            connection = self._open()
            try:
                sync_cache(self.cache, connection)
                yield Reading(connection, self.cache, self._tails, self._ratios)
            except sqlite3.Error as exc:
                raise self._failure(exc) from exc
            self._after_operation()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Reading]:
        """A read section in one read transaction: several queries see the same commit."""
        with self.read() as transaction:
            transaction.connection.execute("BEGIN")
            self._tails.transactions += 1
            try:
                yield transaction
            finally:
                self._tails.transactions += 1
                transaction.connection.execute("COMMIT")

    # -- the write section's steps (commit.WritePath.write) ------------------------------------

    def _begin_write(self, keys: Collection[Key]) -> sqlite3.Connection:
        """BEGIN IMMEDIATE: the write lock up front, one writer of the whole database, so the
        conversations it changes, ``keys``, need no lock of their own."""
        connection = self._open()
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc
        return connection

    def _transaction(self, connection: sqlite3.Connection) -> Transaction:
        sync_cache(self.cache, connection)
        return Transaction(connection, self.cache, self._tails, self._ratios)

    def _commit_write(self, connection: sqlite3.Connection, transaction: Transaction) -> None:
        changes.mark(connection, transaction.touched, transaction.gone)
        connection.execute("COMMIT")

    def _rollback(self, connection: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")

    def _forget(self) -> None:
        self.cache.clear()
        self._tails.clear()
        self._ratios.clear()

    def _storage_error(self, exc: BaseException) -> StorageError | None:
        return self._failure(exc) if isinstance(exc, sqlite3.Error) else None

    def _after_operation(self) -> None:
        self._wal.after_operation(self._connection)

    def purge_deleted(self) -> bool:
        """The engine's purge of deleted text (``seam.HistoryStore``), run by ``write`` after
        the commit of a transaction that removed text: checkpoint and truncate the WAL so that
        deleted or replaced text is gone from it too. Never raises: the change is made, and a
        reset that cannot finish now (disk full, another connection reading or writing past
        RESET_WAIT_MS) is logged and retried (``wal.WalReset``). Returns whether it finished."""
        with self._lock:
            self._wal.pending = True
            try:
                connection = self._open()
            except StorageError as exc:
                log.warning("the WAL reset of %s is pending: %s", self.path, exc)
                self._wal.schedule()
                return False
            return self._wal.attempt(connection, RESET_WAIT_MS)

    #: SQLite's purge is the WAL reset, at once either way.
    purge_now = purge_deleted

    def close(self) -> None:
        """Close the connection, after a last try of a pending WAL reset."""
        with self._lock:
            if self._wal.pending and self._connection is not None:
                self._wal.attempt(self._connection, RESET_WAIT_MS)
            self._close_connection()
            self._wal.cancel()

    # -- the connection -------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._connection is not None:
            if self._file == _file_id(self.path):
                return self._connection
            self._lost_file()
        self._refuse_damaged()
        connection = self._connect()
        self._configure(connection)
        self._connection = connection
        self._file = _file_id(self.path)
        self._sidecars = {suffix: _file_id(f"{self.path}{suffix}") for suffix in _SIDECARS}
        self._forget()
        self.cache.version = None
        self._tails.writes += 1  # a new connection counts data_version afresh
        self._secrets.clear()
        return connection

    def _refuse_damaged(self) -> None:
        """A file SQLite found corrupt stays refused until it is moved away or restored."""
        if self._damaged is not None:
            identity, reason = self._damaged
            if self._identity() == identity:
                raise StorageError(reason)
            self._damaged = None

    def _connect(self) -> sqlite3.Connection:
        try:
            # Owner-only from the first byte, whatever the umask; another user's store refused.
            files.make_folder(self.folder)
            files.check_folder(self.folder, self.path.name)
            files.create_file(self.path)
            for suffix in ("", *_SIDECARS):
                files.check_file(Path(f"{self.path}{suffix}"))
            return sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=failures.BUSY_TIMEOUT_MS / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open {self.path}: {failures.reason(exc)}") from exc

    def _configure(self, connection: sqlite3.Connection) -> None:
        """Pragmas and migrations of a new connection; it is closed when they fail."""
        try:
            connection.execute(f"PRAGMA busy_timeout = {failures.BUSY_TIMEOUT_MS}")
            # Refuse a newer schema before anything (even the WAL switch) writes to the file.
            check_version(connection)
            connection.execute("PRAGMA secure_delete = ON")
            _enable_wal(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            migrate(connection)
            keys.ensure(connection)  # a file from a build that knew fewer keys
            for suffix in _SIDECARS:
                files.tighten(Path(f"{self.path}{suffix}"))
        except NewerSchema as exc:
            connection.close()
            raise StorageError(str(exc)) from exc
        except sqlite3.Error as exc:
            connection.close()
            raise self._failure(exc, f"cannot use {self.path}: ") from exc

    def _idle_connection(self) -> sqlite3.Connection | None:
        """The open connection while the path still names its file (for the idle WAL retry)."""
        if self._connection is None or self._file != _file_id(self.path):
            return None
        return self._connection

    def _lost_file(self) -> None:
        """The open file is no longer the one at the path (deleted, its folder moved or
        renamed, or another file moved over it): writing on would put acknowledged rows where
        no later open finds them. Checkpoint its WAL into it (wherever it is now), close it, and
        open what is at the path, as a restart or another window would."""
        log.warning(
            "%s was deleted, moved or replaced while the server had it open; from now on the "
            "file at that path is used (a new database if there is none)",
            self.path,
        )
        connection = self._connection
        assert connection is not None
        # Every committed row into the old file (through its open descriptor), so a file moved
        # away is complete without the -wal left at the path. SQLite itself does not checkpoint
        # a moved file on close.
        with contextlib.suppress(sqlite3.Error):
            connection.execute(f"PRAGMA busy_timeout = {RESET_WAIT_MS}")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._close_connection()
        self._wal.pending = False  # the WAL it was about went with the old file
        # The old file's -wal and -shm, when still at the path, would be read as the new
        # file's: its pages over another database. Only the very files opened with it go.
        for suffix, identity in self._sidecars.items():
            side = f"{self.path}{suffix}"
            if identity is not None and _file_id(side) == identity:
                with contextlib.suppress(OSError):
                    os.unlink(side)
        self._sidecars = {}

    def _identity(self) -> tuple[int, ...] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def _failure(self, exc: sqlite3.Error, context: str = "") -> StorageError:
        """The StorageError for ``exc``. A file SQLite reports corrupt is closed and refused from
        then on (until it is replaced), so no later write goes into a damaged file."""
        reason = context + failures.reason(exc)
        code = failures.primary_code(exc)
        if code in failures.UNWRITABLE and not os.access(self.folder, os.W_OK):
            # SQLite only says "unable to open database file" when it cannot create the -shm.
            reason += f"; the folder {self.folder} is not writable"
        if code in failures.DAMAGED:
            reason += (
                f"; {self.path} is damaged and was left as it is: restore it from a backup or "
                "move it away"
            )
            self._close_connection()
            self._damaged = (self._identity(), reason)
        return StorageError(reason)

    def _close_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None
            self._file = None
