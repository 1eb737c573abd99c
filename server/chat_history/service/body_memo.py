"""The provider bodies ``prepare`` rendered lately, kept between requests (issue 45): a prepare of
a conversation whose sent rows, route and body options are those of a recent one reuses that
body (its rendering, cache marks and native compaction items) instead of formatting it again.

A body is keyed on everything ``providers.format_body`` reads: the rows by value (they hash by
identity and compare by value, as the prepare pipeline's turn memos), the route's kind, model
and ``Target`` (alias endpoint, state scope), the breakpoints, the context note, when what
stands in was saved and the native compaction's items (their JSON). A row changed anywhere —
an edit, a redaction, a cut tool result, a fence, new ``providerData``, by this process or
another — is another value, so a remembered body can never stand for it; a branch switch,
retention or a deletion changes the rows sent. Bounded in entries and in bytes of the rows
kept (``model.resident_bytes``); the manager drops it all when the server is at rest."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from chat_history.model import Message, StoredMessage, resident_bytes

#: Bodies kept: a few conversations, each with its request and its compaction proposal.
MAX_BODIES = 8
#: Bytes of the rows behind the kept bodies, counted twice (the rows, and the body that
#: renders them, which holds their text and may hold a copy of their images).
MAX_BYTES = 8 * 1024 * 1024


class _ByValue:
    """A row of text the request made (the context note) as a key part: a new object on every
    request, so keyed by its text and compared by value. Only for rows of strings (``_plain``):
    in a mapping ``1 == 1.0 == True`` though their JSON differs."""

    __slots__ = ("_hash", "row")

    def __init__(self, row: Message) -> None:
        self.row = row
        self._hash = hash((row.role, row.content))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByValue) and self.row == other.row


_Key = tuple[tuple[object, ...], Hashable]


def _plain(row: Message) -> bool:
    """Whether ``row`` is only strings: no tool calls, attachments, provider data, metadata."""
    return not (row.tool_calls or row.attachments or row.provider_data or row.metadata)


def _rows_key(rows: Sequence[Message]) -> tuple[object, ...]:
    """``rows`` as a key: a stored row as itself (its identity hashed, its value compared, as
    the turn memos key them), as is any other row but one of plain text the request made,
    which is keyed by value."""
    return tuple(
        _ByValue(row) if not isinstance(row, StoredMessage) and _plain(row) else row for row in rows
    )


class BodyMemo:
    """Bodies keyed on (rows, what else renders them), least recently used dropped first past
    ``max_entries`` or ``max_bytes``. Thread-safe: ``prepared_request`` formats outside the
    manager's lock. A remembered body is shared by the answers that reuse it; nothing changes
    a body once made (formatters and ``cache_points.mark`` build new ones)."""

    def __init__(self, max_entries: int = MAX_BODIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_Key, tuple[dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        #: each row the kept bodies hold: its bytes, and how many of them hold it (a body after
        #: an append holds the rows of the one before: each is measured once)
        self._rows: dict[object, list[int]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def bytes(self) -> int:
        """What the kept bodies are counted as (twice the bytes of their rows)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def body(
        self,
        rows: Sequence[Message],
        made_of: Hashable,
        render: Callable[[], dict[str, Any]],
    ) -> dict[str, Any]:
        """The body remembered for ``rows`` and ``made_of`` (everything else ``render`` reads),
        else ``render()``, remembered when it fits the bound."""
        parts = _rows_key(rows)
        key = (parts, made_of)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found[0]
            self.misses += 1
        body = render()
        with self._lock:
            held_rows = self._rows
            weights = [
                held[0] if (held := held_rows.get(part)) is not None else resident_bytes(row)
                for part, row in zip(parts, rows, strict=True)
            ]
            size = 2 * sum(weights)
            if size > self.max_bytes:
                return body
            old = self._entries.pop(key, None)
            if old is not None:
                self._drop(key, old[1])
            self._entries[key] = (body, size)
            self._bytes += size
            for part, weight in zip(parts, weights, strict=True):
                held_rows.setdefault(part, [weight, 0])[1] += 1
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                dropped, (_, dropped_size) = self._entries.popitem(last=False)
                self._drop(dropped, dropped_size)
        return body

    def _drop(self, key: _Key, size: int) -> None:
        """What a body no longer kept counted (its entry is gone already)."""
        self._bytes -= size
        held_rows = self._rows
        for part in key[0]:
            held = held_rows[part]
            held[1] -= 1
            if not held[1]:
                del held_rows[part]

    def at_rest(self) -> None:
        """Forget every body (the server is at rest: ``ChatHistoryManager.rest``)."""
        with self._lock:
            self._entries.clear()
            self._rows.clear()
            self._bytes = 0
