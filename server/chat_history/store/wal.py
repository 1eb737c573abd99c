"""The WAL reset after a delete: checkpoint and truncate the -wal so deleted or replaced text is
gone from the files too. It never fails the operation that deleted: a reset that cannot finish
now is retried after every later operation, every RESET_RETRY_SECONDS while idle, and at close."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from chat_history.store import failures
from chat_history.store.engine import sqlite3

#: How long a WAL reset waits for readers and writers of other connections: the first attempt
#: after a delete, and at close. A reset that cannot finish is retried, so a delete need not
#: wait the whole busy timeout for another window's long read.
RESET_WAIT_MS = 2_000
#: Seconds between the retries of a pending WAL reset while the server is idle.
RESET_RETRY_SECONDS = 2.0

log = logging.getLogger("chat_history")


class WalReset:
    """The pending reset of one store. ``idle_connection`` answers, under ``lock``, the open
    connection while it is still the file at the path (None when closed or moved away)."""

    def __init__(
        self,
        path: Path,
        lock: threading.RLock,
        idle_connection: Callable[[], sqlite3.Connection | None],
    ) -> None:
        self._path = path
        self._lock = lock
        self._idle_connection = idle_connection
        #: a WAL reset that did not finish: deleted text may still be in the -wal
        self.pending = False
        self._failures = 0  # attempts failed since the last reset that finished
        self._timer: threading.Timer | None = None

    def attempt(self, connection: sqlite3.Connection, wait_ms: int) -> bool:
        """One attempt at the pending reset, waiting at most ``wait_ms`` for other connections;
        outside any transaction of this connection. Returns whether it finished."""
        why = ""
        try:
            connection.execute(f"PRAGMA busy_timeout = {wait_ms}")
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                why = "another connection is reading or writing the database"
        except sqlite3.Error as exc:
            why = failures.reason(exc)
        finally:
            with contextlib.suppress(sqlite3.Error):
                connection.execute(f"PRAGMA busy_timeout = {failures.BUSY_TIMEOUT_MS}")
        if not why:
            self._finished()
            return True
        self._failed(why)
        return False

    def _finished(self) -> None:
        if self._failures:
            log.warning("the pending WAL reset of %s is done", self._path)
        self.pending = False
        self._failures = 0

    def _failed(self, why: str) -> None:
        self._failures += 1
        if self._failures == 1:  # once per pending reset, not per retry
            log.warning(
                "the WAL reset of %s did not finish (%s): the change is made; deleted text may "
                "stay in the -wal until the reset is retried",
                self._path,
                why,
            )
        self.schedule()

    def after_operation(self, connection: sqlite3.Connection | None) -> None:
        """Retry a pending reset without waiting for other connections (after an operation, so
        it delays no answer beyond one checkpoint)."""
        if self.pending and connection is not None and not connection.in_transaction:
            self.attempt(connection, 0)

    def schedule(self) -> None:
        """Retry in RESET_RETRY_SECONDS (one timer at a time)."""
        timer = self._timer
        if timer is not None and timer.is_alive() and threading.current_thread() is not timer:
            return
        timer = threading.Timer(RESET_RETRY_SECONDS, self._retry_when_idle)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def cancel(self) -> None:
        """Stop the retry timer (the store closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _retry_when_idle(self) -> None:
        with self._lock:
            if self._timer is not threading.current_thread():
                return  # closed, or replaced by a newer timer
            connection = self._idle_connection() if self.pending else None
            if connection is None:
                self._timer = None  # done, closed or moved: the next open starts afresh
                return
            if connection.in_transaction or not self.attempt(connection, 0):
                self.schedule()
                return
            self._timer = None
