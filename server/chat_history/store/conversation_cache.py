"""The fast path: a bounded LRU of whole conversations. When ``data_version`` shows another
connection committed, the conversations it changed are dropped (their change marks,
store.changes), so it never serves stale rows and keeps the others. Bounded in
conversations, rows and bytes (``model.resident_bytes``: everything a row holds, images,
providerData and metadata included): rows alone let two unlimited ``get``s of histories with
large images keep gigabytes resident."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import attrs

from chat_history.model import Key, StoredMessage, resident_bytes

#: What the cache may hold, measured by ``row_bytes``.
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
#: What it keeps once the server is at rest (``shrink``): the conversations in use stay, a
#: sweep over many (a search, an export, a listing's previews) does not stay resident.
REST_BYTES = 8 * 1024 * 1024
#: A row's memory (the one measure of every cache of rows).
row_bytes = resident_bytes


class ConversationCache:
    """Whole conversations, least recently used dropped first past any bound."""

    def __init__(
        self, max_conversations: int, max_rows: int, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.max_conversations = max_conversations
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Key, list[StoredMessage]] = OrderedDict()
        self._sizes: dict[Key, int] = {}
        self._rows = 0
        self._bytes = 0
        #: SQLite's ``data_version`` when the cached rows were read (None: not read yet)
        self.version: int | None = None
        #: the change counter (store.changes) when ``version`` was read (None: not read yet)
        self.position: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def rows(self) -> int:
        """The rows held, across every conversation."""
        return self._rows

    @property
    def bytes(self) -> int:
        """The estimated bytes held (``row_bytes``)."""
        return self._bytes

    def get(self, key: Key) -> list[StoredMessage] | None:
        """A copy of the conversation's rows (it becomes the most recently used); None when not
        held."""
        rows = self._entries.get(key)
        if rows is None:
            return None
        self._entries.move_to_end(key)
        return list(rows)

    def put(self, key: Key, rows: Sequence[StoredMessage]) -> None:
        """Hold the conversation's rows, unless it alone is past a bound; the least recently used go
        until every bound holds."""
        self.drop(key)
        if len(rows) > self.max_rows:
            return
        size = sum(map(row_bytes, rows))
        if size > self.max_bytes:
            return
        self._entries[key] = list(rows)
        self._sizes[key] = size
        self._rows += len(rows)
        self._bytes += size
        self._evict()

    def extend(self, key: Key, rows: Sequence[StoredMessage]) -> None:
        """Add rows this process just wrote; only a conversation already cached is kept."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.extend(rows)
        size = sum(map(row_bytes, rows))
        self._sizes[key] += size
        self._rows += len(rows)
        self._bytes += size
        self._evict()

    def remove_ids(self, key: Key, ids: set[int]) -> None:
        """Drop the named rows of a held conversation (deleted by retention or an edit)."""
        entry = self._entries.get(key)
        if entry is None:
            return
        kept = [row for row in entry if row.id not in ids]
        size = sum(row_bytes(row) for row in entry if row.id in ids)
        self._rows -= len(entry) - len(kept)
        self._sizes[key] -= size
        self._bytes -= size
        self._entries[key] = kept

    def replace(self, key: Key, row: StoredMessage) -> None:
        """Put an edited row in its place (rows are in id order)."""
        entry = self._entries.get(key)
        if entry is None:
            return
        index = bisect.bisect_left(entry, row.id, key=lambda r: r.id)
        if index < len(entry) and entry[index].id == row.id:
            size = row_bytes(row) - row_bytes(entry[index])
            entry[index] = row
            self._sizes[key] += size
            self._bytes += size
            self._evict()

    def set_parents(self, key: Key, parents: Mapping[int, int | None]) -> None:
        """Rows of a held conversation follow other rows now (row id -> its parent)."""
        entry = self._entries.get(key)
        if entry is None:
            return
        for row_id, parent in parents.items():
            index = bisect.bisect_left(entry, row_id, key=lambda r: r.id)
            if index < len(entry) and entry[index].id == row_id:
                entry[index] = attrs.evolve(entry[index], parent_id=parent)

    def drop(self, key: Key) -> None:
        """Forget the conversation (its rows changed other than by what the cache follows)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._rows -= len(entry)
            self._bytes -= self._sizes.pop(key)

    def clear(self) -> None:
        """Forget every conversation (another connection committed, a write rolled back, or the
        connection is new)."""
        self._entries.clear()
        self._sizes.clear()
        self._rows = 0
        self._bytes = 0

    def shrink(self, max_bytes: int = REST_BYTES) -> None:
        """Drop the least recently used conversations until at most ``max_bytes`` are held."""
        while self._entries and self._bytes > max_bytes:
            self._drop_oldest()

    def _evict(self) -> None:
        while self._entries and (
            len(self._entries) > self.max_conversations
            or self._rows > self.max_rows
            or self._bytes > self.max_bytes
        ):
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        key, entry = self._entries.popitem(last=False)
        self._rows -= len(entry)
        self._bytes -= self._sizes.pop(key)
