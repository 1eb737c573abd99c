"""The change watch (protocol.md "Version 3" → Several windows on one conversation): which
conversations of the session's workspace another process changed, for ``chatHistory/changed``.

It remembers a fingerprint of each conversation (policy.changes), read whole at the first look,
and when the store's change token moved (SQLite: ``data_version``, which only another
connection's commit moves) re-reads only the conversations whose change marks are past the
counter it last saw (store.changes): a look costs what changed, not the workspace. The store
tells it of each own write (``store.Store.observer``): at the start, while it holds the write
lock, the others' commits are caught up (so a write never hides them), and before the commit
the conversations it touched are re-read (so its own changes are never reported), except
for writes no request asked for (``unasked``: an expired reply its lease's upkeep interrupted),
which its client hears of as of another process's. ``poll``
runs while idle and before each request; ``take`` hands out what a write found. Another engine
needs only ``change_token``, ``change_position``, ``changed_in``, ``fingerprints``,
``fingerprint`` and ``growth`` on its readings (``refresh`` reads the marked ones' fingerprints
and growth with them), and to call the two hooks from its own write section.

On PostgreSQL a look after another's commit is two statements: the section's own look (the
counter and the marks past it, store.postgres.marks, which also answers ``changed_in``) and one
``refresh`` of every marked conversation (``REFRESH_IN_ONE_STATEMENT``: one statement sees one
commit, so no snapshot is opened for it); while another window writes to the workspace
(``store.watching``: the workspace watched), the look reads the marked conversations with the
marks and the refresh needs no statement (store.postgres.folded). A commit in another
workspace costs no statement more than a quiet database."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from chat_history.model import Key
from chat_history.policy.changes import Change, Fingerprint, changes, merge, pace
from chat_history.store import Reading, Transaction
from chat_history.store.seam import HistoryStore

#: How often an idle server looks (the protocol's bound is 2 s from the commit).
IDLE_SECONDS = 0.5


class ChangeWatch:
    """The fingerprints of one workspace's conversations as this process last saw them."""

    def __init__(self, store: HistoryStore, workspace: Callable[[], str]) -> None:
        self._store = store
        self._workspace = workspace
        self._lock = threading.Lock()
        #: (workspace, conversation fingerprints) last seen; None before the first look
        self._seen: tuple[str, dict[str, Fingerprint]] | None = None
        self._token: object = None
        #: the change counter (store.changes) at the last look; None before the first
        self._position: int | None = None
        self._pending: list[Change] = []
        #: when a "reply" change of each conversation was last told (time.monotonic)
        self._reply_told: dict[str, float] = {}
        #: the writes now are no request's (``unasked``), and what the last one told
        self._unasked = False
        self._told: list[Change] = []
        #: what the last write's ``after_write`` replaced, until the next write begins
        self._undo: (
            tuple[tuple[str, dict[str, Fingerprint]], dict[str, Fingerprint | None]] | None
        ) = None
        store.observer = self
        store.watching = workspace

    def poll(self) -> list[Change]:
        """Catch up with the store now; every change not handed out yet, one per conversation.
        Raises StorageError (then nothing is lost: the next look catches up). When no other
        connection committed since the last look (the change token has not moved), that is
        all it reads: no read transaction (issue 36: this runs before every answer)."""
        seen = self._seen
        if seen is not None and seen[0] == self._workspace():
            with self._store.read() as reading:
                unchanged = reading.change_token() == self._token
                if not unchanged and reading.REFRESH_IN_ONE_STATEMENT:
                    self._catch_up(reading)  # each read is one statement: no snapshot needed
                    return self.take()
            if unchanged:
                return self.take()
        with self._store.snapshot() as reading:
            self._catch_up(reading)
        return self.take()

    def take(self) -> list[Change]:
        """The changes found and not handed out yet (each conversation once); a ``"reply"``
        change told less than ``REPLY_INTERVAL_S`` ago waits for a later look (policy.pace)."""
        if not self._pending:  # the common case, before and after every request
            return []
        with self._lock:
            pending, self._pending = self._pending, []
            told, held = pace(merge(pending), self._reply_told, time.monotonic())
            self._pending = held + self._pending
        return told

    @contextlib.contextmanager
    def unasked(self) -> Iterator[None]:
        """The writes within are no request's (issue 43 item 3: an expired reply interrupted by
        the leases' upkeep): this process's client hears of them at the next look, as of
        another process's."""
        self._unasked = True
        try:
            yield
        finally:
            self._unasked = False

    # -- the store's observer -------------------------------------------------------------

    def before_write(self, transaction: Transaction) -> None:
        self._undo = None
        self._told = []
        self._catch_up(transaction)

    def after_write(self, transaction: Transaction) -> None:
        seen = self._seen
        if seen is None:
            return
        workspace, fingerprints = seen
        undo: dict[str, Fingerprint | None] = {}
        for key in transaction.touched:
            if key.workspace != workspace:
                continue
            undo.setdefault(key.conversation, fingerprints.get(key.conversation))
            found = transaction.fingerprint(key)
            if found is None:
                fingerprints.pop(key.conversation, None)
            else:
                fingerprints[key.conversation] = found
        self._undo = (seen, undo)
        if self._unasked:
            self._tell_own(transaction, workspace, undo, fingerprints)

    def _tell_own(
        self,
        transaction: Transaction,
        workspace: str,
        before: dict[str, Fingerprint | None],
        after: dict[str, Fingerprint],
    ) -> None:
        """An unasked write's changes, found as a look finds another process's (the look
        itself would not: the engine knows its own commits), told with the next look's; taken
        back if its commit fails (``write_failed``)."""
        old = {c: f for c, f in before.items() if f is not None}
        new = {c: after[c] for c in before if c in after}
        growth = {
            c: transaction.growth(Key(workspace, c), old[c].last_id)
            for c in old.keys() & new.keys()
            if old[c] != new[c]
        }
        self._told = changes(old, new, growth)
        with self._lock:
            self._pending += self._told

    def write_failed(self) -> None:
        """The write rolled back after ``after_write`` (its commit failed: a deadlock, a lost
        connection, a full disk): its conversations are as before it, so their fingerprints go
        back to what they were; else the next look would report the rollback as another
        process's change. An unasked write's changes are taken back too."""
        told, self._told = self._told, []
        if told:
            with self._lock:
                self._pending = [c for c in self._pending if not any(c is t for t in told)]
        undo, self._undo = self._undo, None
        if undo is None or undo[0] is not self._seen:
            return
        fingerprints = undo[0][1]
        for conversation, before in undo[1].items():
            if before is None:
                fingerprints.pop(conversation, None)
            else:
                fingerprints[conversation] = before

    # -- steps ----------------------------------------------------------------------------

    def _catch_up(self, reading: Reading) -> None:
        workspace = self._workspace()
        token = reading.change_token()  # before the fingerprints: they see at least as much
        seen = self._seen
        if seen is not None and seen[0] == workspace and token == self._token:
            return
        position = reading.change_position()  # before the marks: none is missed
        if seen is None or seen[0] != workspace or self._position is None:
            self._seen = (workspace, reading.fingerprints(workspace))
        else:
            marked = set(reading.changed_in(workspace, self._position))
            if reading.change_floor() > self._position:  # marks of gone ones were deleted since
                marked |= set(seen[1]) - reading.conversation_ids(workspace)
            self._look(reading, seen[1], marked)
        self._token = token
        self._position = position

    def _look(self, reading: Reading, known: dict[str, Fingerprint], marked: set[str]) -> None:
        """Re-read the ``marked`` conversations (what commits changed since the last look),
        note how each changed, and remember them as they are now."""
        if not marked:
            return
        before = {c: known[c] for c in marked if c in known}
        now, growth = reading.refresh(self._workspace(), before, marked)
        found_changes = changes(before, now, growth)
        if found_changes:
            with self._lock:
                self._pending += found_changes
        for conversation in marked:
            if conversation in now:
                known[conversation] = now[conversation]
            else:
                known.pop(conversation, None)
