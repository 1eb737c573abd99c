"""The fast path: a bounded LRU of whole conversations. ``Store`` drops it whenever SQLite's
``data_version`` shows another connection committed, so it never serves stale rows."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chat_history.model import StoredMessage

if TYPE_CHECKING:
    from chat_history.store.db import Key


class ConversationCache:
    def __init__(self, max_conversations: int, max_rows: int) -> None:
        self.max_conversations = max_conversations
        self.max_rows = max_rows
        self._entries: OrderedDict[Key, list[StoredMessage]] = OrderedDict()
        self._rows = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def rows(self) -> int:
        return self._rows

    def get(self, key: Key) -> list[StoredMessage] | None:
        rows = self._entries.get(key)
        if rows is None:
            return None
        self._entries.move_to_end(key)
        return list(rows)

    def put(self, key: Key, rows: Sequence[StoredMessage]) -> None:
        self.drop(key)
        if len(rows) > self.max_rows:
            return
        self._entries[key] = list(rows)
        self._rows += len(rows)
        self._evict()

    def extend(self, key: Key, rows: Sequence[StoredMessage]) -> None:
        """Add rows this process just wrote; only a conversation already cached is kept."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.extend(rows)
        self._rows += len(rows)
        self._evict()

    def remove_ids(self, key: Key, ids: set[int]) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        kept = [row for row in entry if row.id not in ids]
        self._rows -= len(entry) - len(kept)
        self._entries[key] = kept

    def drop(self, key: Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._rows -= len(entry)

    def clear(self) -> None:
        self._entries.clear()
        self._rows = 0

    def _evict(self) -> None:
        while self._entries and (
            len(self._entries) > self.max_conversations or self._rows > self.max_rows
        ):
            _, entry = self._entries.popitem(last=False)
            self._rows -= len(entry)
