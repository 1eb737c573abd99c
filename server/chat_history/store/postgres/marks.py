"""What one PostgreSQL connection knows of the others' commits (issue 35 item 15): the *look*,
the one statement that begins every section (the role's version counter, the change counter
and, when the version moved, the change marks past this connection's position, together: one
round trip, one snapshot), and what it does with them.

- **Coherence by the marks.** When the version moved, the cache and the remembered tails drop
  only the conversations the marks name (store.changes); the others' tails stay valid (they are
  carried to the new local version), so a request on a conversation nobody else wrote reads
  nothing again. Without a position (a new connection, a superuser who sees several roles'
  counters: ``change_counter`` is -1) everything is dropped, as before the marks.
- **The marks remembered.** The marks read are kept (``Marks``, bounded) past the position they
  started from, with this connection's own commits' marks added, so the change watch's
  ``changed_in`` is answered from memory when its counter is within them: no statement.
- **The local version** (what ``PRAGMA data_version`` answers, ``dialect``) still moves at each
  other commit: whatever keys on it alone (``Reading.revision``, the calibration ratios) reads
  again.
- **The marked conversations read with the marks** (``fold``, a read section's look while
  another window writes to the watched workspace: ``folded``): each marked conversation of that
  workspace's fingerprint and newest rows come in the same statement, so the change watch's
  refresh after another window's commit needs no statement of its own."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from chat_history.model import Key
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.postgres.counter import VERSION
from chat_history.store.postgres.folded import FOLD, FOLD_SECONDS, Folded
from chat_history.store.tail import Tails

#: The marks kept at most (past it, they are forgotten and the position starts them again).
MAX_MARKS = 4096


class Marks:
    """The change marks read past ``floor``, up to ``position`` (the change counter of the last
    look or of this connection's own commit), each conversation's newest stamp."""

    def __init__(self) -> None:
        self.floor: int | None = None
        self.position: int | None = None
        #: the counter's floor as last seen: marks of gone conversations were deleted up to it
        self.forgot = 0
        self._seqs: dict[Key, int] = {}

    def reset(self, position: int | None) -> None:
        """Forget every mark; remember from ``position`` on (None or negative: nothing)."""
        self._seqs.clear()
        usable = position is not None and position >= 0
        self.floor = self.position = position if usable else None

    def add(self, keys: Collection[tuple[Key, int]], position: int) -> None:
        if self.position is None or position < self.position:
            self.reset(position)
            return
        for key, seq in keys:
            self._seqs[key] = max(seq, self._seqs.get(key, seq))
        self.position = position
        if len(self._seqs) > MAX_MARKS:
            self.reset(position)

    def changed_in(self, workspace: str, after: int) -> set[str] | None:
        """The conversations of ``workspace`` marked past ``after`` (None: not known here)."""
        if self.floor is None or self.position is None:
            return None
        if not self.floor <= after <= self.position:
            return None
        return {
            key.conversation
            for key, seq in self._seqs.items()
            if seq > after and key.workspace == workspace
        }


class Looks:
    """The look of one connection: the version counter it last saw, its local version, and
    the marks (``Marks``) that keep its cache and tails in step with the others' commits."""

    def __init__(self, cache: ConversationCache, tails: Tails) -> None:
        self._cache = cache
        self._tails = tails
        self.marks = Marks()
        #: the role's version counter as last seen (None: nothing remembered agrees with any)
        self.seen: int | None = None
        #: moves when the counter moved by others' commits (``PRAGMA data_version``)
        self.local_version = 0
        #: what the looks that fold read of the watched workspace's marked conversations
        self.folded = Folded()
        #: until when (``time.monotonic``) a read section's look folds: a while after a look
        #: found marks of the watched workspace (a quiet one's looks stay the cheapest form)
        self._fold_until = 0.0

    def folds(self, workspace: str | None) -> bool:
        """Whether a read section's look should read ``workspace``'s marked conversations
        (``statement(fold=True)``: it has marks to read, and one found the workspace's lately)."""
        if workspace is None or workspace != self.folded.workspace:
            self.folded.watch(workspace)
            return False
        if self.seen is None or self.marks.position is None:
            return False
        return time.monotonic() < self._fold_until

    def statement(self, extra: str = "", fold: bool = False) -> str:
        """The look: the version, the change counter and, when the version is not the one last
        seen, the marks past the position (when there is one), in one statement (``extra``:
        more columns). With ``fold`` (when ``folds``), each marked conversation
        of the watched workspace's fingerprint and newest rows too (``folded.FOLD``: the
        statement then takes the workspace as its one parameter). Only integers this connection
        read are put in its text."""
        columns = f"v.version, cc.seq, cc.floor{extra}"
        counters = f"({VERSION}) AS v(version), (SELECT seq, floor FROM change_counter) AS cc"
        if self.seen is None or self.marks.position is None:
            return f"SELECT {columns}, NULL, NULL, NULL, FALSE, NULL FROM {counters}"
        folded = f"json_agg({FOLD})" if fold else "NULL::json"
        return (
            f"SELECT {columns}, m.ws, m.cs, m.seqs, TRUE, m.fps FROM {counters} "
            "LEFT JOIN LATERAL (SELECT array_agg(k.workspace) AS ws, "
            f"array_agg(k.conversation) AS cs, array_agg(k.seq) AS seqs, {folded} AS fps "
            f"FROM change_marks k WHERE v.version <> {int(self.seen)} "
            f"AND k.seq > {int(self.marks.position)}) AS m ON TRUE"
        )

    def take(self, row: Any, extra: int = 0) -> None:
        """What the look (``statement``) found: when the version moved, the conversations the
        marks name are dropped from the cache and the tails; everything when there are no marks
        to go by. ``extra``: how many columns ``extra`` added (before the marks)."""
        version, position, forgot = int(row[0]), int(row[1]), int(row[2])
        workspaces, conversations, seqs, marked, fingerprints = row[3 + extra :]
        if version == self.seen:
            return
        before = self.local_version
        self.local_version += 1
        self.seen = version
        old, self.marks.forgot = self.marks.position, forgot
        if not marked or position < 0 or old is None:
            self._cache.clear()
            self._tails.clear()
            self.marks.reset(position)
            self.folded.clear()
        else:
            if forgot > old:  # marks deleted since (counter.py): those gone are not among them
                self._cache.clear()
                self._tails.clear()
                self.folded.clear()
            found = [
                (Key(w, c), int(s))
                for w, c, s in zip(workspaces or (), conversations or (), seqs or (), strict=True)
            ]
            for key, _ in found:
                self._cache.drop(key)
                self._tails.drop(key)
            self._tails.advance(before, self.local_version)
            self.marks.add(found, position)
            if self.folded.take([key for key, _ in found], fingerprints):
                self._fold_until = time.monotonic() + FOLD_SECONDS
        self._cache.version = self.local_version
        self._cache.position = self.marks.position if self.marks.position is not None else -1

    def committed(self, version: int, touched: Collection[Key], forgot: bool = False) -> None:
        """This connection's write committed and bumped the counter to ``version`` (its marks'
        stamp). When no other commit came between, what it remembers is still in step: its own
        marks are added and the position moves on. Otherwise the version last seen stays, so
        the next look reads the marks past the position (the other commit's among them)."""
        if self.seen is None or version - 1 != self.seen:
            return
        self.seen = version
        if forgot:  # its own deleted marks: it knows which (it dropped them from the cache)
            self.marks.forgot = version
        if self.marks.position == version - 1:
            self.marks.add([(key, version) for key in touched], version)
            self._cache.position = version
            self.folded.own(touched)

    def forget(self) -> None:
        """Nothing remembered agrees with the database any more (a rollback, a new
        connection): the next look starts again."""
        self.seen = None
        self.marks.reset(None)
        self.folded.clear()
        self.local_version += 1
