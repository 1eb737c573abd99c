"""Results computed from one turn's rows, remembered on the row tuples (the prepare pipeline
asks the same of the same turns request after request): least recently used dropped first past
a number of entries and past the bytes of the rows they hold (``model.resident_bytes``), so a
few turns of large images are not kept alive after the store has let them go (a
``functools.lru_cache`` of 256 turns held any number of bytes)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from chat_history.model import Message, resident_bytes

T = TypeVar("T")


class TurnMemo(Generic[T]):
    """Values keyed on (rows, arguments). Rows hash by identity and compare by value, so a hit
    is the same rows; the memo holds them, so an identity is never reused while remembered."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The bytes of the rows the remembered values hold (``model.resident_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, rows: Sequence[Message], args: Hashable, compute: Callable[[], T]) -> T:
        """The remembered value for ``rows`` and ``args``, else ``compute()`` remembered when
        the rows fit the bound."""
        key = (rows, args)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found[0]
        value = compute()
        size = sum(map(resident_bytes, rows))
        if size > self.max_bytes:
            return value
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
        return value

    def clear(self) -> None:
        """Forget every remembered value."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
