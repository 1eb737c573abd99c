"""SQLite queries. One write transaction per logical operation (BEGIN IMMEDIATE), WAL, a busy
timeout, ``secure_delete`` and a WAL reset after deletes so deleted text does not linger (retried
until it succeeds). The file at the path is the database: one deleted, moved away or replaced
while open is noticed, and the file at the path is opened instead."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from chat_history.errors import StorageError
from chat_history.model import (
    Attachment,
    Message,
    StoredMessage,
    ToolCall,
    compact_json,
    tool_calls_json,
)
from chat_history.store import files
from chat_history.store.cache import ConversationCache
from chat_history.store.schema import (
    DATABASE_FILE,
    FIGURES,
    NewerSchema,
    check_version,
    migrate,
)

BUSY_TIMEOUT_MS = 15_000
#: How long a WAL reset waits for readers and writers of other connections: the first attempt
#: after a delete, and at close. A reset that cannot finish is retried (``Store._retry_reset``),
#: so a delete need not wait the whole busy timeout for another window's long read.
RESET_WAIT_MS = 2_000
#: Seconds between the retries of a pending WAL reset while the server is idle.
RESET_RETRY_SECONDS = 2.0

log = logging.getLogger("chat_history")
#: Conversations whose end ``Store`` remembers (all are forgotten past it), and the few whose
#: newest rows it keeps, with the content characters kept for each.
_TAILS = 64
_RECENT_TAILS = 8
_RECENT_CHARS = 2_000_000
#: SQLITE_CORRUPT and SQLITE_NOTADB, the primary result codes of a damaged file.
_DAMAGED = (11, 26)
#: SQLITE_READONLY and SQLITE_CANTOPEN.
_UNWRITABLE = (8, 14)
_SIDECARS = ("-wal", "-shm")

_ADD_FIGURES = f"INSERT INTO turn_figures VALUES (?, ?, ?, {', '.join('?' * (2 * len(FIGURES)))})"
#: The running sums through the newest recorded turn: its own figures plus its ``earlier_``.
_LAST_FIGURES = (
    f"SELECT {', '.join(f'{n} + earlier_{n}' for n in FIGURES)} FROM turn_figures "
    "WHERE workspace = ? AND conversation = ? ORDER BY turn DESC LIMIT 1"
)

#: A new row's id is one more than any id the table holds or ever deleted (schema v3).
_INSERT_MESSAGE = (
    "INSERT INTO messages (id, workspace, conversation, turn, role, content, tool_calls, "
    "tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens) VALUES ("
    "(SELECT MAX(highest_deleted, COALESCE((SELECT MAX(id) FROM messages), 0)) + 1 "
    "FROM id_floor), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_TOTALS = (
    "UPDATE conversations SET message_count = ?, tokens = ?, last_turn = ?, turn_start_id = ?, "
    "oldest_timestamp = ?, last_activity = ? WHERE workspace = ? AND conversation = ?"
)
_INSERT_TOTALS = (
    "INSERT INTO conversations (message_count, tokens, last_turn, turn_start_id, "
    "oldest_timestamp, last_activity, workspace, conversation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Run before deleting messages, so no id is handed out twice (schema v3).
_RAISE_ID_FLOOR = (
    "UPDATE id_floor SET highest_deleted = (SELECT MAX(id) FROM messages) "
    "WHERE (SELECT MAX(id) FROM messages) > highest_deleted"
)

_COLUMNS = (
    "id, turn, role, content, tool_calls, tool_call_id, name, attachments, timestamp, "
    "provider_data, metadata, tokens"
)


@attrs.frozen(cache_hash=True)
class Key:
    workspace: str
    conversation: str


@attrs.frozen
class ConversationTotals:
    message_count: int
    tokens: int
    last_turn: int
    turn_start_id: int
    oldest_timestamp: int | None
    last_activity: int


@attrs.define
class _Tail:
    """What this connection last saw of a conversation's end: its totals, its newest rows (the
    running turn among them), the running sums of its turn figures. Valid while the connection's
    ``data_version`` is still ``version``: no other connection has committed since, and this
    one keeps the tail in step with its own writes (deleting drops it)."""

    version: int
    totals: ConversationTotals | None
    #: the transaction (``Store._transactions``) that last checked ``version``
    checked: int
    #: the running sums of the newest recorded turn's figures (its own plus its ``earlier_``)
    figure_sums: tuple[int, ...] | None = None
    #: the conversation's newest rows, oldest first, as last read or written here
    recent: list[StoredMessage] | None = None
    recent_chars: int = 0
    #: turn_figures rows looked up (turn -> own figures then running sums); recorded turns
    #: never change, and deleting drops the tail
    figure_rows: dict[int, tuple[int, ...]] = attrs.Factory(dict)
    #: whether ``recent`` reaches back to the conversation's first row
    recent_whole: bool = False


@attrs.frozen
class StoredSummary:
    summary: str
    updated_at: int
    covers_through_id: int | None


@attrs.frozen
class RowMetaRecord:
    id: int
    turn: int
    role: str
    tokens: int
    timestamp: int


@attrs.frozen
class DatabaseStats:
    messages: int
    conversations: int
    workspaces: int
    summaries: int
    oldest_timestamp: int | None
    newest_timestamp: int | None


@attrs.frozen
class ConversationRecord:
    conversation: str
    message_count: int
    tokens: int
    last_activity: int
    has_summary: bool


def _dump(value: Any) -> str | None:
    if not value:
        return None
    return compact_json(value)


def _row_to_message(row: sqlite3.Row | tuple[Any, ...]) -> StoredMessage:
    (
        id_,
        turn,
        role,
        content,
        tool_calls,
        tool_call_id,
        name,
        attachments,
        timestamp,
        provider_data,
        metadata,
        tokens,
    ) = row
    return StoredMessage(
        id=id_,
        turn=turn,
        role=role,
        content=content,
        tool_calls=tuple(ToolCall.from_json(c) for c in json.loads(tool_calls))
        if tool_calls
        else (),
        tool_call_id=tool_call_id,
        name=name,
        attachments=tuple(Attachment.from_json(a) for a in json.loads(attachments))
        if attachments
        else (),
        timestamp=timestamp,
        provider_data=json.loads(provider_data) if provider_data else {},
        metadata=json.loads(metadata) if metadata else {},
        tokens=tokens,
    )


def _message_columns(message: Message, timestamp: int) -> tuple[Any, ...]:
    return (
        message.role,
        message.content,
        tool_calls_json(message.tool_calls) if message.tool_calls else None,
        message.tool_call_id,
        message.name,
        _dump([a.as_json() for a in message.attachments]),
        timestamp,
        _dump(dict(message.provider_data)),
        _dump(dict(message.metadata)),
    )


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return f"{text} (still locked after {BUSY_TIMEOUT_MS} ms)"
    return text


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
    give_up = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > give_up:
                raise
            time.sleep(0.005)


class Store:
    """The database of one user: opened lazily, so a broken file answers StorageError per request
    while the server stays up, and is retried on the next request."""

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
        self._data_version: int | None = None
        # (file identity, reason) once SQLite found the file corrupt: refused until replaced.
        self._damaged: tuple[tuple[int, ...] | None, str] | None = None
        self.cache = ConversationCache(cache_conversations, cache_rows)
        self._tails: dict[Key, _Tail] = {}
        self._recent_keys: dict[Key, None] = {}  # insertion order: least recently used first
        # Bumped when a write() or snapshot() begins and when it ends: a tail checked in the
        # current one has ``checked`` equal to it, and none outside them has.
        self._transactions = 0
        #: (st_dev, st_ino) of the file the connection opened: the path must still name it
        self._file: tuple[int, int] | None = None
        #: the same for its -wal and -shm (None: not there at the time)
        self._sidecars: dict[str, tuple[int, int] | None] = {}
        #: a WAL reset that did not finish: deleted text may still be in the -wal
        self._reset_pending = False
        self._reset_failures = 0  # attempts failed since the last reset that finished
        self._retry_timer: threading.Timer | None = None

    # -- connection -------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._connection is not None:
            if self._file == self._file_at_path():
                return self._connection
            self._lost_file()
        if self._damaged is not None:
            identity, reason = self._damaged
            if self._identity() == identity:
                raise StorageError(reason)
            self._damaged = None  # moved away or restored: try again
        try:
            # Owner-only from the first byte, whatever the umask; another user's store refused.
            files.make_folder(self.folder)
            files.check_folder(self.folder, self.path.name)
            files.create_file(self.path)
            for suffix in ("", *_SIDECARS):
                files.check_file(Path(f"{self.path}{suffix}"))
            connection = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open {self.path}: {_reason(exc)}") from exc
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Refuse a newer schema before anything (even the WAL switch) writes to the file.
            check_version(connection)
            connection.execute("PRAGMA secure_delete = ON")
            _enable_wal(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            migrate(connection)
            for suffix in _SIDECARS:
                files.tighten(Path(f"{self.path}{suffix}"))
        except NewerSchema as exc:
            connection.close()
            raise StorageError(str(exc)) from exc
        except sqlite3.Error as exc:
            connection.close()
            raise self._failure(exc, f"cannot use {self.path}: ") from exc
        self._connection = connection
        self._file = self._file_at_path()
        self._sidecars = {suffix: _file_id(f"{self.path}{suffix}") for suffix in _SIDECARS}
        self._data_version = None
        self.cache.clear()
        self._tails.clear()
        return connection

    def _file_at_path(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the file the path names now; None when there is none."""
        return _file_id(self.path)

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
        self._reset_pending = False  # the WAL it was about went with the old file
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
        reason = context + _reason(exc)
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in _UNWRITABLE and not os.access(self.folder, os.W_OK):
            # SQLite only says "unable to open database file" when it cannot create the -shm.
            reason += f"; the folder {self.folder} is not writable"
        if code in _DAMAGED:
            reason += (
                f"; {self.path} is damaged and was left as it is: restore it from a backup or "
                "move it away"
            )
            self._close_connection()
            self._damaged = (self._identity(), reason)
        return StorageError(reason)

    def close(self) -> None:
        """Close the connection, after a last try of a pending WAL reset."""
        with self._lock:
            if self._reset_pending and self._connection is not None:
                self._try_reset(self._connection, RESET_WAIT_MS)
            self._close_connection()
            if self._retry_timer is not None:
                self._retry_timer.cancel()
                self._retry_timer = None

    def _close_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None
            self._file = None

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read section: drops the cache when another connection changed the file."""
        with self._lock:
            connection = self._open()
            try:
                self._sync_cache(connection)
                yield connection
            except sqlite3.Error as exc:
                raise self._failure(exc) from exc
            self._retry_reset()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read section in one read transaction: several queries see the same commit."""
        with self.read() as connection:
            connection.execute("BEGIN")
            self._transactions += 1
            try:
                yield connection
            finally:
                self._transactions += 1
                connection.execute("COMMIT")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that takes the write lock up front (BEGIN IMMEDIATE)."""
        with self._lock:
            connection = self._open()
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failure(exc) from exc
            self._transactions += 1
            try:
                self._sync_cache(connection)
                yield connection
                connection.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                self.cache.clear()
                self._tails.clear()
                if isinstance(exc, sqlite3.Error):
                    raise self._failure(exc) from exc
                raise
            finally:
                self._transactions += 1
            self._retry_reset()

    def _sync_cache(self, connection: sqlite3.Connection) -> None:
        if not len(self.cache):
            # Nothing cached, nothing can be stale: skip the pragma (one statement of every
            # append). The baseline is read again before the next conversation is cached.
            self._data_version = None
            return
        version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self.cache.clear()
            self._data_version = version

    def reset_wal(self) -> bool:
        """Checkpoint and truncate the WAL so that deleted or replaced text is gone from it too;
        called after the commit that deleted it. Never raises: the change is made, and a reset
        that cannot finish now (disk full, another connection reading or writing past
        RESET_WAIT_MS) is logged and retried after every later operation, every
        RESET_RETRY_SECONDS while idle, and at close. Returns whether it finished."""
        with self._lock:
            self._reset_pending = True
            try:
                connection = self._open()
            except StorageError as exc:
                log.warning("the WAL reset of %s is pending: %s", self.path, exc)
                self._schedule_retry()
                return False
            return self._try_reset(connection, RESET_WAIT_MS)

    def _try_reset(self, connection: sqlite3.Connection, wait_ms: int) -> bool:
        """One attempt at the pending reset, waiting at most ``wait_ms`` for other connections;
        outside any transaction of this connection."""
        why = ""
        try:
            connection.execute(f"PRAGMA busy_timeout = {wait_ms}")
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                why = "another connection is reading or writing the database"
        except sqlite3.Error as exc:
            why = _reason(exc)
        finally:
            with contextlib.suppress(sqlite3.Error):
                connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not why:
            if self._reset_failures:
                log.warning("the pending WAL reset of %s is done", self.path)
            self._reset_pending = False
            self._reset_failures = 0
            return True
        self._reset_failures += 1
        if self._reset_failures == 1:  # once per pending reset, not per retry
            log.warning(
                "the WAL reset of %s did not finish (%s): the change is made; deleted text may "
                "stay in the -wal until the reset is retried",
                self.path,
                why,
            )
        self._schedule_retry()
        return False

    def _retry_reset(self) -> None:
        """Retry a pending WAL reset without waiting for other connections (after an
        operation, so it delays no answer beyond one checkpoint)."""
        connection = self._connection
        if self._reset_pending and connection is not None and not connection.in_transaction:
            self._try_reset(connection, 0)

    def _schedule_retry(self) -> None:
        timer = self._retry_timer
        if timer is not None and timer.is_alive() and threading.current_thread() is not timer:
            return
        timer = threading.Timer(RESET_RETRY_SECONDS, self._retry_when_idle)
        timer.daemon = True
        self._retry_timer = timer
        timer.start()

    def _retry_when_idle(self) -> None:
        with self._lock:
            if self._retry_timer is not threading.current_thread():
                return  # closed, or replaced by a newer timer
            connection = self._connection
            if not self._reset_pending or connection is None:
                self._retry_timer = None  # done, or closed: the next open starts afresh
                return
            if self._file != self._file_at_path():
                self._retry_timer = None  # the next request reopens (and drops the reset)
                return
            if connection.in_transaction or not self._try_reset(connection, 0):
                self._schedule_retry()
                return
            self._retry_timer = None

    # -- queries (call inside read() or write()) ----------------------------------------------

    @staticmethod
    def totals(connection: sqlite3.Connection, key: Key) -> ConversationTotals | None:
        row = connection.execute(
            "SELECT message_count, tokens, last_turn, turn_start_id, oldest_timestamp, "
            "last_activity FROM conversations WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        ).fetchone()
        return ConversationTotals(*row) if row else None

    @staticmethod
    def rows_from(connection: sqlite3.Connection, key: Key, first_id: int) -> list[StoredMessage]:
        return [
            _row_to_message(r)
            for r in connection.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
                "AND id >= ? ORDER BY id",
                (key.workspace, key.conversation, first_id),
            )
        ]

    def _tail(self, connection: sqlite3.Connection, key: Key) -> _Tail:
        """The conversation's tail, checked in this write() or snapshot() (a pragma, once): what
        this connection remembers when nothing else has committed since, else read afresh."""
        tail = self._tails.get(key)
        if tail is not None and tail.checked == self._transactions:
            return tail
        assert self._transactions % 2, "only inside write() or snapshot()"
        version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if tail is None or tail.version != version:
            if len(self._tails) >= _TAILS:
                self._tails.clear()
            totals = self.totals(connection, key)
            tail = self._tails[key] = _Tail(version, totals, self._transactions)
        tail.checked = self._transactions
        return tail

    def tail_totals(self, connection: sqlite3.Connection, key: Key) -> ConversationTotals | None:
        """The conversation's totals inside ``write()`` or ``snapshot()``: remembered when no
        other connection has committed since (one pragma instead of a read)."""
        return self._tail(connection, key).totals

    def _checked_tail(self, key: Key) -> _Tail | None:
        tail = self._tails.get(key)
        return tail if tail is not None and tail.checked == self._transactions else None

    def current_turn(
        self, connection: sqlite3.Connection, key: Key, totals: ConversationTotals
    ) -> list[StoredMessage]:
        """The rows of the conversation's newest turn (from ``totals``): the end of the newest
        rows this connection remembers, read (and remembered) when they do not reach back to
        the turn's first row."""
        start = totals.turn_start_id
        tail = self._checked_tail(key)
        if tail is None or tail.totals is not totals:
            return self.rows_from(connection, key, start)
        recent = tail.recent
        if recent is None or not (tail.recent_whole or (recent and recent[0].id <= start)):
            rows = self.rows_from(connection, key, start)
            self._remember_recent(key, tail, rows, whole=False)
            return list(rows)
        first = len(recent)
        while first > 0 and recent[first - 1].id >= start:  # the turn is at the end: walk back
            first -= 1
        return recent[first:]

    def _track(self, key: Key, after: ConversationTotals, stored: list[StoredMessage]) -> None:
        """Keep the conversation's tail in step with rows this connection just inserted."""
        tail = self._tails.get(key)
        if tail is None:
            return
        if tail.recent is not None:
            tail.recent.extend(stored)
            tail.recent_chars += sum(len(row.content) for row in stored)
            self._trim_recent(tail)
        tail.totals = after

    def all_rows(self, connection: sqlite3.Connection, key: Key) -> list[StoredMessage]:
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        if self._data_version is None:
            # Before the rows: a commit in between only makes the next check drop the cache.
            self._data_version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        rows = self.rows_from(connection, key, 0)
        self.cache.put(key, rows)
        return rows

    def page(
        self, connection: sqlite3.Connection, key: Key, limit: int, before_id: int | None
    ) -> tuple[list[StoredMessage], bool]:
        """Up to ``limit`` rows before ``before_id`` (the newest when None), in order, and
        whether older ones exist. The newest page, inside ``snapshot()``, comes through
        ``newest_first``: from memory when this connection remembers the rows."""
        if before_id is None and self._transactions % 2:
            with contextlib.closing(self.newest_first(connection, key)) as newest:
                rows = list(itertools.islice(newest, limit + 1))
        else:
            bound = before_id if before_id is not None else (1 << 62)
            rows = [
                _row_to_message(r)
                for r in connection.execute(
                    f"SELECT {_COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
                    "AND id < ? ORDER BY id DESC LIMIT ?",
                    (key.workspace, key.conversation, bound, limit + 1),
                )
            ]
        has_more = len(rows) > limit
        return list(reversed(rows[:limit])), has_more

    def newest_first(
        self, connection: sqlite3.Connection, key: Key
    ) -> Generator[StoredMessage, None, None]:
        """The conversation's rows newest first, each read when it is consumed; inside
        ``snapshot()`` or ``write()``. The newest rows this connection last read or wrote come
        from memory while nothing else has committed, and the rows read are remembered."""
        tail = self._tail(connection, key)
        recent = tail.recent
        before = 1 << 62
        if recent is not None:
            yield from reversed(recent)
            if tail.recent_whole:
                return
            if recent:
                before = recent[0].id
        read: list[StoredMessage] = []
        whole = False
        cursor = connection.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
            "AND id < ? ORDER BY id DESC",
            (key.workspace, key.conversation, before),
        )
        try:
            for raw in cursor:
                row = _row_to_message(raw)
                read.append(row)
                yield row
            whole = True
        finally:
            cursor.close()
            if read or whole:
                read.reverse()
                self._remember_recent(key, tail, read + (recent or []), whole)

    def _remember_recent(
        self, key: Key, tail: _Tail, rows: list[StoredMessage], whole: bool
    ) -> None:
        """Keep ``rows`` (the conversation's newest, oldest first) as the tail's recent rows,
        within the bounds: _RECENT_CHARS of content each, for _RECENT_TAILS conversations."""
        tail.recent = rows
        tail.recent_chars = sum(len(row.content) for row in rows)
        tail.recent_whole = whole
        self._trim_recent(tail)
        self._recent_keys.pop(key, None)
        self._recent_keys[key] = None
        while len(self._recent_keys) > _RECENT_TAILS:
            evicted = next(iter(self._recent_keys))
            del self._recent_keys[evicted]
            other = self._tails.get(evicted)
            if other is not None:
                other.recent = None

    @staticmethod
    def _trim_recent(tail: _Tail) -> None:
        recent = tail.recent
        if recent is None or tail.recent_chars <= _RECENT_CHARS:
            return
        drop = 0
        while drop < len(recent) and tail.recent_chars > _RECENT_CHARS:
            tail.recent_chars -= len(recent[drop].content)
            drop += 1
        del recent[:drop]
        tail.recent_whole = False

    @staticmethod
    def system_rows(
        connection: sqlite3.Connection, key: Key, before_id: int
    ) -> list[StoredMessage]:
        """The system rows older than ``before_id``, in order (the partial index of v2)."""
        return [
            _row_to_message(r)
            for r in connection.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE workspace = ? AND conversation = ? "
                "AND role = 'system' AND id < ? ORDER BY id",
                (key.workspace, key.conversation, before_id),
            )
        ]

    @staticmethod
    def oldest_spoken_turn(connection: sqlite3.Connection, key: Key) -> int | None:
        """The turn number of the oldest non-system row."""
        row = connection.execute(
            "SELECT turn FROM messages WHERE workspace = ? AND conversation = ? "
            "AND role != 'system' ORDER BY id LIMIT 1",
            (key.workspace, key.conversation),
        ).fetchone()
        return int(row[0]) if row else None

    def add_turn_figures(
        self,
        connection: sqlite3.Connection,
        key: Key,
        figures: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """Record completed turns' figures (turn number, values in FIGURES order), each with the
        running sums of every turn recorded before it: remembered from this connection's last
        recording, or read from the newest recorded turn."""
        if not figures:
            return
        tail = self._checked_tail(key)
        earlier = tail.figure_sums if tail is not None else None
        if earlier is None:
            last = connection.execute(_LAST_FIGURES, (key.workspace, key.conversation)).fetchone()
            earlier = tuple(last) if last else (0,) * len(FIGURES)
        for turn, own in figures:
            connection.execute(
                _ADD_FIGURES, (key.workspace, key.conversation, turn, *own, *earlier)
            )
            earlier = tuple(a + b for a, b in zip(earlier, own, strict=True))
        if tail is not None:
            tail.figure_sums = earlier

    def figures_between(
        self, connection: sqlite3.Connection, key: Key, first_turn: int, last_turn: int
    ) -> tuple[int, ...] | None:
        """The summed figures of turns ``first_turn``..``last_turn`` from the running sums at
        both ends (two lookups, remembered in the tail inside a transaction), or None when
        either end has none."""
        tail = self._checked_tail(key)
        found = tail.figure_rows if tail is not None else {}
        if len(found) > 256:
            found.clear()  # turns a growing conversation no longer asks for
        wanted = [turn for turn in {first_turn, last_turn} if turn not in found]
        if wanted:
            for r in connection.execute(
                f"SELECT turn, {', '.join(FIGURES)}, {', '.join(f'earlier_{n}' for n in FIGURES)} "
                f"FROM turn_figures WHERE workspace = ? AND conversation = ? AND turn IN "
                f"({', '.join('?' * len(wanted))})",
                (key.workspace, key.conversation, *wanted),
            ):
                found[r[0]] = r[1:]
        if first_turn not in found or last_turn not in found:
            return None
        width = len(FIGURES)
        first, last = found[first_turn], found[last_turn]
        return tuple(last[width + i] + last[i] - first[width + i] for i in range(width))

    @staticmethod
    def row_meta(connection: sqlite3.Connection, key: Key) -> list[RowMetaRecord]:
        return [
            RowMetaRecord(*r)
            for r in connection.execute(
                "SELECT id, turn, role, tokens, timestamp FROM messages WHERE workspace = ? "
                "AND conversation = ? ORDER BY id",
                (key.workspace, key.conversation),
            )
        ]

    def insert(
        self,
        connection: sqlite3.Connection,
        key: Key,
        rows: Sequence[tuple[Message, int, int]],
        totals: ConversationTotals | None,
        now_ms: int,
    ) -> tuple[list[StoredMessage], ConversationTotals]:
        """Insert (message, turn, tokens) rows in order (a row without a timestamp gets
        ``now_ms``) and update the conversation's totals; returns the rows and the new totals."""
        stored: list[StoredMessage] = []
        count = totals.message_count if totals else 0
        tokens = totals.tokens if totals else 0
        last_turn = totals.last_turn if totals else 0
        turn_start = totals.turn_start_id if totals else 0
        oldest = totals.oldest_timestamp if totals else None
        for message, turn, row_tokens in rows:
            timestamp = now_ms if message.timestamp is None else message.timestamp
            cursor = connection.execute(
                _INSERT_MESSAGE,
                (
                    key.workspace,
                    key.conversation,
                    turn,
                    *_message_columns(message, timestamp),
                    row_tokens,
                ),
            )
            row_id = int(cursor.lastrowid or 0)
            if turn != last_turn or turn_start == 0:
                turn_start = row_id
            last_turn = turn
            count += 1
            tokens += row_tokens
            oldest = timestamp if oldest is None else min(oldest, timestamp)
            stored.append(
                StoredMessage.of(
                    message, id=row_id, turn=turn, tokens=row_tokens, timestamp=timestamp
                )
            )
        after = ConversationTotals(count, tokens, last_turn, turn_start, oldest, now_ms)
        connection.execute(
            _UPDATE_TOTALS if totals else _INSERT_TOTALS,
            (count, tokens, last_turn, turn_start, oldest, now_ms, key.workspace, key.conversation),
        )
        self.cache.extend(key, stored)
        self._track(key, after, stored)
        return stored, after

    def delete_rows(self, connection: sqlite3.Connection, key: Key, ids: Iterable[int]) -> None:
        """Delete rows by id and recompute the conversation's totals from what is left."""
        id_list = sorted(ids)
        connection.execute(_RAISE_ID_FLOOR)
        for start in range(0, len(id_list), 500):
            chunk = id_list[start : start + 500]
            connection.execute(
                f"DELETE FROM messages WHERE workspace = ? AND conversation = ? AND id IN "
                f"({','.join('?' * len(chunk))})",
                (key.workspace, key.conversation, *chunk),
            )
        count, tokens, oldest = connection.execute(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), MIN(timestamp) FROM messages "
            "WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        ).fetchone()
        connection.execute(
            "UPDATE conversations SET message_count = ?, tokens = ?, oldest_timestamp = ? "
            "WHERE workspace = ? AND conversation = ?",
            (count, tokens, oldest, key.workspace, key.conversation),
        )
        oldest_turn = self.oldest_spoken_turn(connection, key)
        connection.execute(
            "DELETE FROM turn_figures WHERE workspace = ? AND conversation = ? AND turn < ?",
            (key.workspace, key.conversation, (1 << 62) if oldest_turn is None else oldest_turn),
        )
        self.cache.remove_ids(key, set(id_list))
        self._tails.pop(key, None)  # its totals changed

    def clear(self, connection: sqlite3.Connection, key: Key) -> int:
        connection.execute(_RAISE_ID_FLOOR)
        deleted = connection.execute(
            "DELETE FROM messages WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        ).rowcount
        connection.execute(
            "DELETE FROM summaries WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        )
        connection.execute(
            "DELETE FROM conversations WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        )
        connection.execute(
            "DELETE FROM turn_figures WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        )
        self.cache.drop(key)
        self._tails.pop(key, None)
        return int(deleted)

    @staticmethod
    def summary(connection: sqlite3.Connection, key: Key) -> StoredSummary | None:
        row = connection.execute(
            "SELECT summary, updated_at, covers_through_id FROM summaries WHERE workspace = ? "
            "AND conversation = ?",
            (key.workspace, key.conversation),
        ).fetchone()
        return StoredSummary(*row) if row else None

    @staticmethod
    def save_summary(connection: sqlite3.Connection, key: Key, summary: StoredSummary) -> bool:
        """Save the conversation's summary; returns whether it replaced one (whose text then
        needs a WAL reset to be gone from the files)."""
        replaced = (
            connection.execute(
                "SELECT 1 FROM summaries WHERE workspace = ? AND conversation = ?",
                (key.workspace, key.conversation),
            ).fetchone()
            is not None
        )
        connection.execute(
            "INSERT INTO summaries (workspace, conversation, summary, updated_at, "
            "covers_through_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, conversation) DO "
            "UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at, "
            "covers_through_id = excluded.covers_through_id",
            (
                key.workspace,
                key.conversation,
                summary.summary,
                summary.updated_at,
                summary.covers_through_id,
            ),
        )
        return replaced

    @staticmethod
    def delete_summary(connection: sqlite3.Connection, key: Key) -> None:
        connection.execute(
            "DELETE FROM summaries WHERE workspace = ? AND conversation = ?",
            (key.workspace, key.conversation),
        )

    @staticmethod
    def conversations(connection: sqlite3.Connection, workspace: str) -> list[ConversationRecord]:
        rows = connection.execute(
            "SELECT c.conversation, c.message_count, c.tokens, c.last_activity, "
            "s.conversation IS NOT NULL FROM conversations c LEFT JOIN summaries s "
            "ON s.workspace = c.workspace AND s.conversation = c.conversation "
            "WHERE c.workspace = ? AND (c.message_count > 0 OR s.conversation IS NOT NULL) "
            "UNION ALL SELECT s.conversation, 0, 0, s.updated_at, 1 FROM summaries s "
            "WHERE s.workspace = ? AND NOT EXISTS (SELECT 1 FROM conversations c WHERE "
            "c.workspace = s.workspace AND c.conversation = s.conversation)",
            (workspace, workspace),
        ).fetchall()
        records = [ConversationRecord(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]
        return sorted(records, key=lambda r: (-r.last_activity, r.conversation))

    @staticmethod
    def workspaces(connection: sqlite3.Connection) -> list[str]:
        """Every workspace that holds messages or a summary, sorted."""
        return [
            r[0]
            for r in connection.execute(
                "SELECT workspace FROM conversations WHERE message_count > 0 UNION "
                "SELECT workspace FROM summaries ORDER BY 1"
            )
        ]

    @staticmethod
    def stats(connection: sqlite3.Connection) -> DatabaseStats:
        messages, oldest, newest = connection.execute(
            "SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM messages"
        ).fetchone()
        conversations, workspaces = connection.execute(
            "SELECT COUNT(*), COUNT(DISTINCT workspace) FROM (SELECT workspace, conversation FROM "
            "conversations WHERE message_count > 0 UNION SELECT workspace, conversation FROM "
            "summaries)"
        ).fetchone()
        (summaries,) = connection.execute("SELECT COUNT(*) FROM summaries").fetchone()
        return DatabaseStats(messages, conversations, workspaces, summaries, oldest, newest)
