"""The remembered tail: what this connection last saw of a conversation's end (its totals, its
newest rows, the running sums of its turn figures), so an append or a prepare on a long history
costs a pragma instead of a read while no other connection has committed. Sits next to the
cache (``conversation_cache.py``), which remembers whole conversations."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence

import attrs

from chat_history.model import Key, StoredMessage, resident_bytes
from chat_history.store import queries
from chat_history.store.engine import sqlite3
from chat_history.store.queries import ConversationTotals
from chat_history.store.rows import to_message
from chat_history.store.schema import FIGURES

#: Conversations whose end is remembered (all are forgotten past it), and the few whose newest
#: rows are kept, with the bytes of rows kept for each (``model.resident_bytes``: images,
#: providerData and metadata included; counting content characters alone let paging three
#: conversations of 10 MB images keep ~600 MB resident).
_TAILS = 64
_RECENT_TAILS = 8
_RECENT_BYTES = 8 * 1024 * 1024


@attrs.define
class Tail:
    """One conversation's remembered end. Valid while the connection's ``data_version`` is still
    ``version``: no other connection has committed since, and this one keeps the tail in step
    with its own writes (deleting drops it)."""

    version: int
    totals: ConversationTotals | None
    #: the transaction (``Tails.transactions``) that last checked ``version``
    checked: int
    #: the running sums of the newest recorded turn's figures (its own plus its ``earlier_``)
    figure_sums: tuple[int, ...] | None = None
    #: the conversation's newest rows, oldest first, as last read or written here
    recent: list[StoredMessage] | None = None
    #: what ``recent`` holds (``resident_bytes``), at most _RECENT_BYTES
    recent_bytes: int = 0
    #: turn_figures rows looked up (turn -> own figures then running sums); recorded turns
    #: never change, and deleting drops the tail
    figure_rows: dict[int, tuple[int, ...]] = attrs.Factory(dict)
    #: whether ``recent`` reaches back to the conversation's first row
    recent_whole: bool = False

    def trim(self) -> None:
        """Drop the oldest recent rows past _RECENT_BYTES."""
        recent = self.recent
        if recent is None or self.recent_bytes <= _RECENT_BYTES:
            return
        drop = 0
        while drop < len(recent) and self.recent_bytes > _RECENT_BYTES:
            self.recent_bytes -= resident_bytes(recent[drop])
            drop += 1
        del recent[:drop]
        self.recent_whole = False


class Tails:
    """The tails of one connection, and the count of its transactions: bumped when a write or a
    snapshot begins and when it ends, so a tail checked in the current one has ``checked`` equal
    to it, and none outside them has."""

    def __init__(self) -> None:
        self._tails: dict[Key, Tail] = {}
        self._recent_keys: dict[Key, None] = {}  # insertion order: least recently used first
        self.transactions = 0
        #: write transactions this store began (committed or not) and connections it opened:
        #: with SQLite's data_version (other connections' commits), what ``Reading.revision``
        #: answers
        self.writes = 0

    def __getitem__(self, key: Key) -> Tail:
        return self._tails[key]

    @property
    def in_transaction(self) -> bool:
        """Whether a write or snapshot is open (the count is odd inside one)."""
        return bool(self.transactions % 2)

    def drop(self, key: Key) -> None:
        """Forget the conversation's tail (its totals changed other than by an append here)."""
        self._tails.pop(key, None)

    def amend(
        self,
        key: Key,
        totals: ConversationTotals | None,
        *,
        removed: frozenset[int] = frozenset(),
        replaced: StoredMessage | None = None,
    ) -> None:
        """Keep the conversation's tail in step with an edit this connection made: the new
        ``totals``, the ``removed`` rows gone from the remembered ones and ``replaced`` put in
        its row's place. The running sums of turn figures are read again when next needed."""
        tail = self._tails.get(key)
        if tail is None:
            return
        tail.totals = totals
        tail.figure_sums = None
        tail.figure_rows.clear()
        recent = tail.recent
        if recent is None:
            return
        if removed:
            # The rows an edit deletes are mostly the newest: walk from the end while they go.
            first = len(recent)
            while first and recent[first - 1].id in removed:
                first -= 1
            gone = recent[first:]
            del recent[first:]
            if len(gone) < len(removed) and recent and recent[0].id <= max(removed):
                gone += [row for row in recent if row.id in removed]
                recent[:] = [row for row in recent if row.id not in removed]
            tail.recent_bytes -= sum(map(resident_bytes, gone))
        if replaced is not None:
            for index in range(len(recent) - 1, -1, -1):
                if recent[index].id == replaced.id:
                    tail.recent_bytes += resident_bytes(replaced) - resident_bytes(recent[index])
                    recent[index] = replaced
                    break
        tail.trim()

    def set_parents(self, key: Key, parents: Mapping[int, int | None]) -> None:
        """Remembered rows of the conversation follow other rows now (row id -> its parent)."""
        tail = self._tails.get(key)
        if tail is None or not tail.recent:
            return
        recent = tail.recent
        for index, row in enumerate(recent):
            if row.id in parents:
                recent[index] = attrs.evolve(row, parent_id=parents[row.id])

    def clear(self) -> None:
        """Forget every tail (another connection committed, a write rolled back, or the connection
        is new)."""
        self._tails.clear()

    def advance(self, old: int, new: int) -> None:
        """The connection's ``data_version`` moved from ``old`` to ``new`` by commits that did
        not touch the conversations still held (their tails were dropped first): each tail valid
        at ``old`` is valid at ``new`` (PostgreSQL's change marks, store.postgres.marks)."""
        for tail in self._tails.values():
            if tail.version == old:
                tail.version = new

    def tail(self, connection: sqlite3.Connection, key: Key) -> Tail:
        """The conversation's tail, checked in this write or snapshot (a pragma, once): what this
        connection remembers when nothing else has committed since, else read afresh."""
        tail = self._tails.get(key)
        if tail is not None and tail.checked == self.transactions:
            return tail
        assert self.in_transaction, "only inside write() or snapshot()"
        version = queries.data_version(connection)
        if tail is None or tail.version != version:
            if len(self._tails) >= _TAILS:
                self._tails.clear()
            totals = queries.totals(connection, key)
            tail = self._tails[key] = Tail(version, totals, self.transactions)
        tail.checked = self.transactions
        return tail

    def checked(self, key: Key) -> Tail | None:
        """The tail when it was checked in the current transaction, else None."""
        tail = self._tails.get(key)
        return tail if tail is not None and tail.checked == self.transactions else None

    def track(self, key: Key, after: ConversationTotals, stored: list[StoredMessage]) -> None:
        """Keep the conversation's tail in step with rows this connection just inserted."""
        tail = self._tails.get(key)
        if tail is None:
            return
        if tail.recent is not None:
            tail.recent.extend(stored)
            tail.recent_bytes += sum(map(resident_bytes, stored))
            tail.trim()
        tail.totals = after

    def remember_recent(self, key: Key, tail: Tail, rows: list[StoredMessage], whole: bool) -> None:
        """Keep ``rows`` (the conversation's newest, oldest first) as the tail's recent rows,
        within the bounds: _RECENT_BYTES each (the newest that fit; rows past it are not even
        measured), for _RECENT_TAILS conversations. ``rows`` itself is left as it is: the
        caller may be returning it."""
        kept = 0
        first = len(rows)
        while first:
            size = resident_bytes(rows[first - 1])
            if kept + size > _RECENT_BYTES:
                break
            kept += size
            first -= 1
        tail.recent = rows[first:]
        tail.recent_bytes = kept
        tail.recent_whole = whole and not first
        self._recent_keys.pop(key, None)
        self._recent_keys[key] = None
        while len(self._recent_keys) > _RECENT_TAILS:
            evicted = next(iter(self._recent_keys))
            del self._recent_keys[evicted]
            other = self._tails.get(evicted)
            if other is not None:
                other.recent = None

    # -- reads through the tail -----------------------------------------------------------------

    def current_turn(
        self, connection: sqlite3.Connection, key: Key, totals: ConversationTotals
    ) -> list[StoredMessage]:
        """The rows of the conversation's newest turn (from ``totals``): the end of the newest
        rows this connection remembers, read (and remembered) when they do not reach back to
        the turn's first row."""
        start = totals.turn_start_id
        tail = self.checked(key)
        if tail is None or tail.totals is not totals:
            return queries.rows_from(connection, key, start)
        recent = tail.recent
        if recent is None or not (tail.recent_whole or (recent and recent[0].id <= start)):
            rows = queries.rows_from(connection, key, start)
            self.remember_recent(key, tail, rows, whole=False)
            return list(rows)
        first = len(recent)
        while first > 0 and recent[first - 1].id >= start:  # the turn is at the end: walk back
            first -= 1
        return recent[first:]

    def newest_first(
        self, connection: sqlite3.Connection, key: Key
    ) -> Generator[StoredMessage, None, None]:
        """The conversation's rows newest first, each read when it is consumed; inside a snapshot
        or write. The newest rows this connection last read or wrote come from memory while
        nothing else has committed, and the rows read are remembered."""
        tail = self.tail(connection, key)
        recent = tail.recent
        before = queries.NO_ID
        if recent is not None:
            yield from reversed(recent)
            if tail.recent_whole:
                return
            if recent:
                before = recent[0].id
        read: list[StoredMessage] = []
        whole = False
        cursor = queries.rows_before(connection, key, before)
        try:
            for raw in cursor:
                row = to_message(raw)
                read.append(row)
                yield row
            whole = True
        finally:
            cursor.close()
            if read or whole:
                read.reverse()
                self.remember_recent(key, tail, read + (recent or []), whole)

    # -- turn figures ---------------------------------------------------------------------------

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
        tail = self.checked(key)
        earlier = tail.figure_sums if tail is not None else None
        if earlier is None:
            earlier = queries.last_figure_sums(connection, key)
        for turn, own in figures:
            queries.add_figures(connection, key, turn, own, earlier)
            earlier = tuple(a + b for a, b in zip(earlier, own, strict=True))
        if tail is not None:
            tail.figure_sums = earlier

    def figures_between(
        self, connection: sqlite3.Connection, key: Key, first_turn: int, last_turn: int
    ) -> tuple[int, ...] | None:
        """The summed figures of turns ``first_turn``..``last_turn`` from the running sums at
        both ends (two lookups, remembered in the tail inside a transaction), or None when
        either end has none."""
        tail = self.checked(key)
        found = tail.figure_rows if tail is not None else {}
        if len(found) > 256:
            found.clear()  # turns a growing conversation no longer asks for
        wanted = [turn for turn in {first_turn, last_turn} if turn not in found]
        if wanted:
            found.update(queries.figure_rows(connection, key, wanted))
        if first_turn not in found or last_turn not in found:
            return None
        width = len(FIGURES)
        first, last = found[first_turn], found[last_turn]
        return tuple(last[width + i] + last[i] - first[width + i] for i in range(width))
