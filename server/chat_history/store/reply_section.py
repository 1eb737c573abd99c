"""Replies in flight on one transaction (``Replies(tx)``): what the service's reply operations
read and change, over the stateless SQL of ``store.replies``, keeping the transaction's memory
of the conversation (cache, tail, touched) in step through ``Transaction.rows_changed``."""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.model import Key, ToolCall, compact_json, tool_calls_json
from chat_history.store import replies
from chat_history.store.replies import Held, Reply
from chat_history.store.transaction import Reading, Transaction


class ReplyReading:
    """The replies a read section sees."""

    def __init__(self, reading: Reading) -> None:
        self._connection = reading.connection

    def streaming(self, key: Key) -> Reply | None:
        """The conversation's streaming reply (None: none streams)."""
        return replies.streaming(self._connection, key)

    def by_id(self, row_id: int) -> Reply | None:
        """The reply of row ``row_id``, in whichever conversation it is now (None: none)."""
        return replies.by_id(self._connection, row_id)

    def expired(self, now: int) -> list[Held]:
        """Every reply whose lease ended before ``now``."""
        return replies.expired(self._connection, now)

    def held_by(self, writer: str) -> list[Held]:
        """Every reply ``writer`` streams."""
        return replies.held_by(self._connection, writer)

    def streaming_turns(self, key: Key) -> frozenset[int]:
        """The turns of the conversation's streaming rows."""
        return replies.streaming_turns(self._connection, key)

    def text(self, row_id: int) -> str:
        """A streaming reply's whole text."""
        return replies.text(self._connection, row_id)


class Replies(ReplyReading):
    """The replies a write section changes."""

    def __init__(self, tx: Transaction) -> None:
        super().__init__(tx)
        self._tx = tx

    def start(self, key: Key, row_id: int, text: str, writer: str, until: int) -> None:
        """Row ``row_id`` streams from now on with the text ``text``."""
        replies.start(self._tx.connection, key, row_id, text, writer, until)
        self._tx.rows_changed(key)

    def add(self, key: Key, row_id: int, delta: str, until: int) -> int:
        """``delta`` appended; returns the text's length."""
        length = replies.add_part(self._tx.connection, row_id, delta, until)
        self._tx.rows_changed(key)
        return length

    def replace(self, key: Key, row_id: int, text: str, until: int) -> int:
        """The text replaced; returns its length."""
        length = replies.replace_text(self._tx.connection, row_id, text, until)
        self._tx.rows_changed(key)
        return length

    def set_calls(
        self, key: Key, row_id: int, calls: tuple[ToolCall, ...], provider_data: dict[str, object]
    ) -> None:
        """The row's tool calls and providerData replaced."""
        replies.set_columns(
            self._tx.connection,
            row_id,
            tool_calls_json(calls) if calls else None,
            compact_json(provider_data) if provider_data else None,
        )
        self._tx.rows_changed(key)

    def forget(self, key: Key, row_id: int, status: str | None) -> None:
        """The reply ended with ``status`` (None: complete): the row's own columns hold it now."""
        replies.forget(self._tx.connection, row_id, status)
        self._tx.rows_changed(key)

    def renew(self, writer: str, ids: Sequence[int], until: int) -> None:
        """``writer``'s leases on ``ids`` hold until ``until``."""
        replies.renew(self._tx.connection, writer, ids, until)
