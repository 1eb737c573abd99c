"""The replies family (``wire/methods/replies``; protocol.md "Version 4" → Replies in flight):
``beginReply``, ``updateReply`` and ``endReply``, each one write transaction on the manager; the
writer that holds this process's leases, and its upkeep (``tend``, ``release``).

- **One streaming row per conversation**: a second begin is ``ReplyInProgress`` (1004).
- **Only the writer updates or ends its reply**: a row that is not the conversation's streaming
  reply, or that another process streams, is -32602 ``id``; nothing changes. The writer names
  its reply by its row id, which no re-keying changes: a reply whose workspace moved or was
  re-keyed while it streamed (it moves with its row, ``store.replies``) is still the writer's
  to update and end under the key it began it in, or the one it has now (``_mine``).
- **Leases**: a reply's lease holds ``LEASE_MS`` from its last renewal; the writer renews its
  own every ``RENEW_MS`` (and on every update), and any process ends an expired one as
  interrupted (``tend``); its exit interrupts its own at once (``release``).
- **Bounds**: a delta or a whole text past ``MAX_TEXT_CHARS`` is -32602; a writer may update one
  reply ``BURST_UPDATES`` times at once and ``UPDATES_PER_SECOND`` a second after that (a client
  sends a few a second), beyond which an update is refused and changes nothing."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import attrs

from chat_history.errors import InvalidParams, ReplyInProgress
from chat_history.model import (
    Expected,
    Follow,
    Key,
    Message,
    Origin,
    PruneReport,
    StoredMessage,
    ToolCall,
)
from chat_history.policy.retention import RetentionPlan
from chat_history.policy.tokens import stored_tokens
from chat_history.service.edits import check_expected, refigure_turn
from chat_history.service.manager import ChatHistoryManager, record_in
from chat_history.service.tree_steps import follow_in, settle_in, with_siblings
from chat_history.store import Transaction
from chat_history.store.replies import Reply
from chat_history.store.reply_section import Replies, ReplyReading

#: How long a lease holds after its last renewal (ms): a killed writer's reply is interrupted
#: within this and one ``RENEW_MS`` (the protocol's bound is 30 s). Tests may shorten it
#: (``CHAT_HISTORY_REPLY_LEASE_MS``).
LEASE_MS = int(os.environ.get("CHAT_HISTORY_REPLY_LEASE_MS", "20000"))
#: How often a running server renews its leases and ends others' expired ones (ms).
RENEW_MS = max(50, LEASE_MS // 4)
#: The longest text a reply holds, and so the longest delta (code points).
MAX_TEXT_CHARS = 4_000_000
#: Updates of one reply a writer may send at once, and a second after that. Tests may slow the
#: rate (``CHAT_HISTORY_REPLY_UPDATES_PER_SECOND``) so that whether a burst goes past it does not
#: depend on how fast the machine serves the updates.
BURST_UPDATES = 200
UPDATES_PER_SECOND = float(os.environ.get("CHAT_HISTORY_REPLY_UPDATES_PER_SECOND", "50"))

EndStatus = Literal["complete", "interrupted", "discard"]
T = TypeVar("T")


@attrs.frozen(kw_only=True)
class ReplyBegin:
    """``beginReply``'s arguments after the wire's checks."""

    continue_id: int | None = None
    message: Message | None = None
    expected: Expected = None
    #: version 5's ``parentId``: the row the reply follows (absent: the active leaf)
    follow: Follow | None = None


@attrs.frozen(kw_only=True)
class ReplyChange:
    """``updateReply``'s (and ``endReply``'s) fields; None: unchanged."""

    content_delta: str | None = None
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    provider_data: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None
    #: an end's origin of its providerData (version 5)
    origin: Origin | None = None


@attrs.frozen
class EndResult:
    """``endReply``: the row as stored (None: discarded), and what retention pruned."""

    message: StoredMessage | None
    pruned: PruneReport | None


# -- the operations --------------------------------------------------------------------------------


def writer(manager: ChatHistoryManager) -> Writer:
    """This process as the writer of ``manager``'s streaming replies (one per manager)."""
    return manager.kept(Writer)


def begin(manager: ChatHistoryManager, key: Key, options: ReplyBegin) -> StoredMessage:
    """A streaming assistant row (or the interrupted newest row again, ``continue_id``).
    Raises ReplyInProgress (1004), ConversationChanged, InvalidParams, StorageError."""
    mine = writer(manager)
    with manager.lock:
        now = manager.clock()

        def record(tx: Transaction, message: Message) -> StoredMessage:
            totals = tx.totals(key)
            stored, _ = record_in(tx, key, totals, [message], max_tool_result_chars=0, now=now)
            return stored[0]

        def begin_in(tx: Transaction) -> StoredMessage:
            row = _begin_in(tx, key, options, mine.name, now, record)
            return with_siblings(tx, key, [row])[0]

        row = manager.write((key,), begin_in)
        mine.started(row.id, key)
        return row


def update(manager: ChatHistoryManager, key: Key, row_id: int, change: ReplyChange) -> int:
    """Apply an update to this process's streaming row; returns its length (code points).
    Raises InvalidParams ``id``/``content_delta``, StorageError."""
    mine = writer(manager)
    with manager.lock:
        mine.admit(row_id)
        now = manager.clock()
        return _on_reply(
            manager, key, row_id, mine, lambda tx, reply: _update_in(tx, reply, change, now)
        )


def end(
    manager: ChatHistoryManager, key: Key, row_id: int, status: EndStatus, change: ReplyChange
) -> EndResult:
    """End this process's streaming row: complete or interrupted (then retention runs as
    after an append), or discarded for good. Raises InvalidParams ``id``, StorageError."""
    mine = writer(manager)
    with manager.lock:
        now = manager.clock()

        def finish(
            tx: Transaction, reply: Reply
        ) -> tuple[Key, StoredMessage | None, RetentionPlan]:
            row = _end_in(tx, reply, status, change, now)
            plan = manager.retention.apply(tx, reply.key, now, tx.totals(reply.key))
            shown = None if row is None else with_siblings(tx, reply.key, [row])[0]
            return reply.key, shown, plan

        where, row, plan = _on_reply(manager, key, row_id, mine, finish)
        mine.ended(row_id)  # a discard's text is purged at its commit
        manager.retention.finish(where, plan)  # its trimmed events name where the row is now
        return EndResult(row, plan.report)


def tend(manager: ChatHistoryManager) -> int:
    """Renew this process's leases and end every expired one as interrupted (a server runs
    it every ``RENEW_MS``); returns how many it interrupted."""
    mine = writer(manager)
    with manager.lock:
        now = manager.clock()
        if mine.held:
            with manager.store.read() as reading:  # where each is now (re-keying moves them)
                held = held_by(reading, mine.name)
            mine.still_held([row_id for _, row_id in held])
            if held:
                manager.write(
                    [k for k, _ in held],
                    lambda tx: Replies(tx).renew(mine.name, [i for _, i in held], now + LEASE_MS),
                )
        with manager.store.read() as reading:
            due = expired(reading, now)
        return _interrupt(manager, due, now, expired_only=True)


def release(manager: ChatHistoryManager) -> int:
    """This process's streaming rows interrupted at once (its exit); returns how many."""
    mine = writer(manager)
    with manager.lock:
        with manager.store.read() as reading:
            held = held_by(reading, mine.name)
        return _interrupt(manager, held, manager.clock(), expired_only=False)


def _interrupt(
    manager: ChatHistoryManager, rows: Sequence[tuple[Key, int]], now: int, *, expired_only: bool
) -> int:
    """End each of ``rows`` as interrupted (with ``expired_only``: if its lease is still
    expired: another process may have renewed it since it was read), each in its own write;
    returns how many ended. A row another process ended or deleted since is passed over."""
    done = 0
    for key, row_id in rows:

        def interrupt(tx: Transaction, reply: Reply) -> StoredMessage | None:
            if expired_only and reply.lease_until >= now:
                return None
            return _end_in(tx, reply, "interrupted", ReplyChange(), now)

        try:
            row = _on_reply(manager, key, row_id, None, interrupt)
        except InvalidParams:  # no longer streaming
            row = None
        writer(manager).ended(row_id)
        done += row is not None
    return done


class _Elsewhere(Exception):
    """The reply is not in the conversation the write locked: re-keying moved it since."""


def _on_reply(
    manager: ChatHistoryManager,
    key: Key,
    row_id: int,
    mine: Writer | None,
    body: Callable[[Transaction, Reply], T],
) -> T:
    """``body(tx, reply)`` in one write on the conversation reply ``row_id`` is in now, once
    ``_mine`` found it to be the caller's (``mine``; None: the leases' upkeep). The write
    locks ``key``, where the reply is unless re-keying moved it while it streamed: then it runs
    again under a lock of the whole database (the store's write locks name the conversations a
    write changes)."""

    def locked(where: Key | None) -> Callable[[Transaction], T]:
        def run(tx: Transaction) -> T:
            reply = _mine(tx, key, row_id, mine)
            if where is not None and reply.key != where:
                raise _Elsewhere
            return body(tx, reply)

        return run

    try:
        return manager.write((key,), locked(key))
    except _Elsewhere:
        return manager.write((), locked(None))


# -- the steps, each on the operation's transaction ------------------------------------------------


def _begin_in(
    tx: Transaction,
    key: Key,
    options: ReplyBegin,
    writer: str,
    now: int,
    record: Callable[[Transaction, Message], StoredMessage],
) -> StoredMessage:
    """Start a streaming row (``record(tx, message)`` stores a new one by the recording rules)
    or make the interrupted newest row ``continue_id`` stream again."""
    check_expected(tx, key, options.expected)
    section = Replies(tx)
    streaming = section.streaming(key)
    if streaming is not None:
        raise ReplyInProgress(streaming.id)
    until = now + LEASE_MS
    if options.continue_id is not None:
        row = _continued(tx, key, options.continue_id)
        section.start(key, row.id, row.content, writer, until)
        tx.touch(key, now)
        return attrs.evolve(row, status="streaming")
    follow_in(tx, key, options.follow, now)
    message = options.message or Message(role="assistant")
    placeholder = attrs.evolve(message, content="", status="streaming")
    stored = record(tx, placeholder)
    section.start(key, stored.id, message.content, writer, until)
    return attrs.evolve(stored, content=message.content)


def _continued(tx: Transaction, key: Key, row_id: int) -> StoredMessage:
    check_continue(tx, key, row_id)
    row = tx.row(key, row_id)
    assert row is not None
    return row


def _mine(tx: Transaction, key: Key, row_id: int, mine: Writer | None) -> Reply:
    """Reply ``row_id`` as the caller may change it, else -32602 ``id``: the one the leases'
    upkeep read (``mine`` None), by its id; a writer's own in ``key``, or wherever re-keying
    took it when ``key`` is the one the writer began it in."""
    reply = ReplyReading(tx).by_id(row_id)
    if reply is None:
        raise InvalidParams("id", "is not a streaming reply of this conversation")
    if mine is None:
        return reply
    if reply.key != key and mine.held.get(row_id) != key:
        raise InvalidParams("id", "is not a streaming reply of this conversation")
    if reply.writer != mine.name:
        raise InvalidParams("id", "is a reply another window is streaming")
    return reply


def _update_in(tx: Transaction, reply: Reply, change: ReplyChange, now: int) -> int:
    """Apply an update to the writer's streaming row; returns the text's length."""
    section, key, row_id = Replies(tx), reply.key, reply.id
    until = now + LEASE_MS
    length = reply.length
    if change.content is not None:
        length = section.replace(key, row_id, change.content, until)
    elif change.content_delta:
        if length + len(change.content_delta) > MAX_TEXT_CHARS:
            raise InvalidParams("content_delta", f"makes the reply longer than {MAX_TEXT_CHARS:,}")
        length = section.add(key, row_id, change.content_delta, until)
    if change.tool_calls is not None or change.provider_data is not None:
        row = tx.row(key, row_id)
        assert row is not None
        calls = row.tool_calls if change.tool_calls is None else change.tool_calls
        data = row.provider_data if change.provider_data is None else change.provider_data
        section.set_calls(key, row_id, calls, dict(data))
    return length


def _end_in(
    tx: Transaction, reply: Reply, status: EndStatus, change: ReplyChange, now: int
) -> StoredMessage | None:
    """End the streaming row: the final fields, its estimate and turn figures; ``discard``
    deletes it. Returns the row as stored."""
    section, key, row_id = Replies(tx), reply.key, reply.id
    row = tx.row(key, row_id)
    assert row is not None
    if status == "discard":
        section.forget(key, row_id, None)
        tx.delete_messages(key, [row])
        # A discarded Regenerate shows the reply it would have replaced again (version 5).
        settle_in(tx, key, row.parent_id, now)
        tx.touch(key, now)
        return None
    ended = attrs.evolve(
        row,
        content=row.content if change.content is None else change.content,
        tool_calls=row.tool_calls if change.tool_calls is None else change.tool_calls,
        provider_data=row.provider_data if change.provider_data is None else change.provider_data,
        metadata=row.metadata if change.metadata is None else change.metadata,
        origin=row.origin if change.origin is None else change.origin,
        status=status,
    )
    fresh = Message(**{f.name: getattr(ended, f.name) for f in attrs.fields(Message)})
    ended = attrs.evolve(ended, tokens=stored_tokens(fresh))
    section.set_calls(key, row_id, ended.tool_calls, dict(ended.provider_data))
    section.forget(key, row_id, None if status == "complete" else status)
    blank = attrs.evolve(row, content="", status=status)  # the column held "" while streaming
    tx.update_message(key, blank, ended)
    refigure_turn(tx, key, ended.turn)
    tx.touch(key, now)
    return ended


class Writer:
    """This process as the writer of replies: its name in the leases, the replies it streams,
    and how fast it may update each."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: the writer's name in ``replies.writer`` (one per process and store)
        self.name = uuid.uuid4().hex
        #: the rows this process streams, by row id, each with the conversation it began in
        #: (the one its client names it by: re-keying may have moved it since)
        self.held: dict[int, Key] = {}
        self._buckets: dict[int, tuple[float, float]] = {}

    def admit(self, row_id: int) -> None:
        """One more update of ``row_id`` now, or -32602 ``id`` past the rate."""
        now = self._clock()
        tokens, at = self._buckets.get(row_id, (float(BURST_UPDATES), now))
        tokens = min(float(BURST_UPDATES), tokens + (now - at) * UPDATES_PER_SECOND)
        if tokens < 1:
            raise InvalidParams(
                "id", f"is updated too often: at most {UPDATES_PER_SECOND:g} updates a second"
            )
        self._buckets[row_id] = (tokens - 1, now)

    def started(self, row_id: int, key: Key) -> None:
        self.held[row_id] = key

    def ended(self, row_id: int) -> None:
        self.held.pop(row_id, None)
        self._buckets.pop(row_id, None)

    def still_held(self, row_ids: Sequence[int]) -> None:
        """Of the rows it holds, only ``row_ids`` still stream (the others were deleted by a
        rewind, or ended by another process after this one stalled past its lease)."""
        for row_id in self.held.keys() - set(row_ids):
            self.ended(row_id)


def expired(reading: Any, now: int) -> list[tuple[Key, int]]:
    """Every reply whose lease ended before ``now``, as (conversation, row)."""
    return [(held.key, held.id) for held in ReplyReading(reading).expired(now)]


def held_by(reading: Any, writer: str) -> list[tuple[Key, int]]:
    """Every reply ``writer`` streams, as (conversation, row)."""
    return [(held.key, held.id) for held in ReplyReading(reading).held_by(writer)]


def check_continue(reading: Any, key: Key, row_id: int | None) -> None:
    """``prepare``'s ``continue_id``: the conversation's newest row, an interrupted reply (a
    streaming one is being generated; a complete one has nothing to continue)."""
    if row_id is None:
        return
    row = reading.row(key, row_id)
    if row is None or row.status != "interrupted" or reading.last_id(key) != row_id:
        raise InvalidParams(
            "continue_id", "must name the conversation's newest row, an interrupted reply"
        )
