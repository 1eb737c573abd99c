"""The manager's seam to the store: what an engine must offer (``HistoryStore``), and the one
runner of write sections (``write_retried``; the section itself, shared by the engines, is
``commit.WritePath.write``). Two engines implement it:
``store.connection.Store`` (SQLite, the default: one file in the storage folder) and
``store.postgres.PostgresStore`` (a PostgreSQL database shared by machines and people). A third
engine is built from this module and ``commit.WritePath`` (whose write section it inherits);
what follows is its whole contract.

**What an engine hands out.** Every query and change an operation makes is a method of
``store.transaction.Reading`` (reads) or ``Transaction`` (a ``Reading`` that also writes); the
service layer never sees a connection or SQL. Both classes are shared: they run the store's one
SQL (``queries``, ``records``, ``edits``, ``tail``, ``calibration``, ``changes``,
``workspaces``, ``keys``, ``overview``, written in SQLite's dialect) on the ``connection`` they
are given, which need only have the face of a ``sqlite3.Connection`` (``execute`` returning a
cursor with ``fetchone``/``fetchall``/``fetchmany``/``rowcount``/``lastrowid`` and iteration,
``executemany``). An engine of another dialect wraps its driver's connection so (PostgreSQL:
``store.postgres.dialect`` rewrites each statement once) and answers ``PRAGMA data_version``
with a number that changes whenever another connection committed. An engine whose search
differs subclasses the two (``search_backlog``, ``search_best``, ``index_for_search``), as
PostgreSQL does; anything else it overrides breaks the one place of each rule.

**Sections.** ``read()``, ``snapshot()`` and ``write()`` are context managers, entered by one
thread at a time per store (the engine holds its own re-entrant lock for the section's length;
the manager holds its lock around each operation too). A section's object is valid inside its
``with`` block only; the service opens an operation's sections one after another. Every
failure of the engine inside a section (an SQL error, a lost connection, a full disk, a damaged
file) leaves it as ``errors.StorageError`` (wire code 1002), naming no
client value; a deadlock or serialization failure of a write leaves it as
``errors.WriteConflict`` (a ``StorageError``) after the rollback. Anything else raised inside
the block (a domain error such as ``InvalidParams``) passes through unchanged.

**What each connection remembers.** ``cache`` (whole conversations) and the remembered tails
and ratios are this connection's memory of the database. They are valid while no other
connection has committed: at the start of every section the engine compares ``data_version``
with the cache's (``transaction.sync_cache``; PostgreSQL in its look, ``postgres.marks``) and
drops what is stale; a write that rolls back
drops all of it, since what it changed in memory never happened. An engine that loses or
reopens its connection drops it too (a new connection's ``data_version`` is not comparable).

**Locks.** ``write(keys)`` names the conversations the write changes. SQLite ignores them
(``BEGIN IMMEDIATE``: one writer of the whole file). PostgreSQL locks each of them, in one order,
beside the other writers of other conversations; a write without keys (one that spans
workspaces, or changes rows every conversation shares: calibration, workspace records, a block
of row ids) locks the whole database. An engine must give the same guarantee: no two writes of
one conversation interleave, and a write without keys excludes every other write. Locks are
taken in one order, so they never wait in a cycle with each other.

**Deleted means deleted, at the commit.** A ``Transaction`` method that deletes or replaces
text sets ``removed_text``; after the commit of such a transaction (never after a rollback,
which removed nothing) ``write`` calls the engine's ``purge_deleted()``, the step that takes the
old bytes out of its files (SQLite: the WAL checkpoint-and-truncate, at once; PostgreSQL: a
table rewrite within its purge interval). No caller purges by hand, so no operation can forget
to; the shared write section (``commit.WritePath``) does it for every engine, as datasette
emits a write's events only after its commit. An engine supplies that section's steps only
(begin, its ``Transaction``, commit with the change marks, rollback, forget, its failures, its
purge); their order, the write observer's calls and the purge are written once."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

from chat_history.errors import WriteConflict
from chat_history.model import Key
from chat_history.store.commit import WriteObserver
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.transaction import Reading, Transaction


class HistoryStore(Protocol):
    """One user's history in one engine, seen through one connection (opened lazily: an engine
    that cannot reach its database raises ``StorageError`` per section and tries again on the
    next, while the server stays up)."""

    #: The remembered whole conversations of this connection (``ConversationCache``, bounded by
    #: conversations and rows). The shared ``Reading``/``Transaction`` fill and update it; the
    #: engine only drops it (``sync_cache`` at a section's start, ``clear()`` after a rollback
    #: or a new connection). Tests and ``stats`` look at it.
    cache: ConversationCache
    #: Told of each write transaction (``WriteObserver``; ``service.watch.ChangeWatch``), or
    #: None (the CLI): ``before_write(tx)`` once the write lock is held and before the body,
    #: ``after_write(tx)`` after the body and before the commit, ``write_failed()`` when the
    #: write rolled back after all (what ``after_write`` saw never happened). Set by whoever
    #: watches; the engine calls it from inside ``write`` only.
    observer: WriteObserver | None
    #: The workspace the change watch watches (``service.watch.ChangeWatch`` sets it), or None.
    #: An engine may read that workspace's marked conversations' fingerprints ahead of the
    #: watch's ``refresh`` (PostgreSQL, in a read section's look: ``postgres.folded``); SQLite
    #: ignores it.
    watching: Callable[[], str] | None

    @property
    def path(self) -> Path | str:
        """Where the history is, for messages and logs only: the SQLite file, or the database
        URL. Never opens anything, never raises."""
        ...

    def read(self) -> AbstractContextManager[Reading]:
        """A read section: a ``Reading`` in which each query sees the newest commit at the time
        it runs (no transaction around them; the cheapest section, for one query or queries
        that need not agree). The cache is checked against ``data_version`` on entry.
        Raises ``StorageError`` on entry (the database cannot be opened) or from any query."""
        ...

    def snapshot(self) -> AbstractContextManager[Reading]:
        """A read section in one read transaction: every query of the block sees the same
        commit (SQLite: ``BEGIN`` deferred, PostgreSQL: ``REPEATABLE READ READ ONLY``), so a
        listing, its totals and its search hits agree. Takes no write lock and blocks no
        writer; ended (committed) when the block ends, whether it raises or not. Raises
        ``StorageError`` as ``read`` does."""
        ...

    def write(self, keys: Collection[Key] = ()) -> AbstractContextManager[Transaction]:
        """One atomic write transaction changing the conversations ``keys`` (none: anything,
        under a lock of the whole database). The locks are taken on entry, before the body
        reads anything, so what it reads stays true until its commit. The block's end commits;
        anything raised inside rolls the whole transaction back (the operation changes
        nothing, and the cache, tails and ratios are dropped) and is raised again, an engine
        failure as ``StorageError``. A deadlock or serialization failure raises
        ``WriteConflict``: nothing changed, and ``write_retried`` runs the body again. After
        a commit whose ``removed_text`` is set, it calls ``purge_deleted()`` before returning.
        Call it through ``write_retried``, the one place that runs a write section. The
        transaction's ``touched`` names the conversations it changed (``write_retried`` checks
        them against ``keys``; the watch re-reads them)."""
        ...

    def purge_deleted(self) -> bool:
        """Take the bytes of text deleted or replaced by the last commit out of the engine's
        files (``secure_delete`` alone leaves old pages in SQLite's WAL, and PostgreSQL's dead
        tuples stay until a rewrite). Called by ``write`` after the commit of a transaction
        whose ``removed_text`` is set, outside its transaction. SQLite
        checkpoints and truncates the WAL at once; PostgreSQL schedules ``purge_now`` within
        its purge interval. Never raises: the deleting operation succeeded, so a purge that
        cannot finish now is logged once and retried (after later operations, on a timer, at
        ``close``). Returns whether it finished now."""
        ...

    def purge_now(self) -> bool:
        """The purge at once, however long it takes (the CLI's ``purge``; PostgreSQL's rewrite
        of the history tables, SQLite's WAL reset). Never raises; returns whether it finished
        (PostgreSQL: False when the role does not own the tables, told once in the log)."""
        ...

    def secret(self, name: str) -> bytes:
        """The database's key ``name`` (``store.keys``: made once per database at creation,
        e.g. the key that authenticates listing cursors), read once per connection and
        remembered. Raises ``StorageError`` (also when the database has no such key).
        """
        ...

    def close(self) -> None:
        """Give a pending purge its last try, stop the engine's timers and close the
        connection. Never raises. A later section opens the database again."""
        ...


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
