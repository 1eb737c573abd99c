"""Replies in flight in the store and the service (store.replies, service.replies), on both
engines: an old database opens and keeps working (every row complete, a reply can stream), the
lease (renewed by its writer, expired ones interrupted by another process, its writer's exit
interrupting at once), a fork of a streaming conversation, and the text read whole across folds
of parts."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from chat_history.errors import InvalidParams, ReplyInProgress
from chat_history.model import Key, Message
from chat_history.service import conversations, edits, history, replies, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.replies import ReplyBegin, ReplyChange
from chat_history.store import Store
from chat_history.store.engine import sqlite3
from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, statements

pytestmark = pytest.mark.engines
KEY = Key("ws", "c")


def streaming(manager: ChatHistoryManager, text: str = "partial") -> int:
    history.append(manager, KEY, [Message(role="user", content="q")])
    row = replies.begin(manager, KEY, ReplyBegin(message=Message(role="assistant", content=text)))
    return int(row.id)


def status(manager: ChatHistoryManager, row_id: int) -> tuple[str, str]:
    row = next(r for r in history.get(manager, KEY).messages if r.id == row_id)
    return row.status, row.content


@pytest.mark.sqlite_only
def test_a_database_of_schema_9_opens_and_keeps_working(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    legacy = sqlite3.connect(folder / DATABASE_FILE)
    for version in range(9):
        for statement in statements(MIGRATIONS[version]):
            legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 9")
    legacy.execute(
        "INSERT INTO messages (id, workspace, conversation, turn, role, content, timestamp, "
        "tokens) VALUES (1, 'ws', 'c', 1, 'user', 'old row', 1764480000000, 5)"
    )
    legacy.execute(
        "INSERT INTO conversations (workspace, conversation, message_count, tokens, last_turn, "
        "turn_start_id, oldest_timestamp, last_activity, created_at) "
        "VALUES ('ws', 'c', 1, 5, 1, 1, 1764480000000, 1764480000000, 1764480000000)"
    )
    legacy.close()
    manager = ChatHistoryManager(Store(folder))
    manager = manager.under(attrs.evolve(manager.settings, max_age_hours=0))  # a year-old row
    try:
        assert [(r.content, r.status) for r in history.get(manager, KEY).messages] == [
            ("old row", "complete")
        ]
        row = replies.begin(manager, KEY, ReplyBegin())
        assert replies.update(manager, KEY, row.id, ReplyChange(content_delta="new")) == 3
        replies.end(manager, KEY, row.id, "complete", ReplyChange())
        assert [r.content for r in history.get(manager, KEY).messages] == ["old row", "new"]
    finally:
        manager.close()


def test_another_process_interrupts_an_expired_lease_keeping_the_text(make_manager, clock) -> None:
    writer, other = make_manager(), make_manager()
    row_id = streaming(writer, "what was ")
    replies.update(writer, KEY, row_id, ReplyChange(content_delta="acknowledged"))
    # Within the lease nothing is interrupted; the writer renews while it runs.
    clock.now += replies.LEASE_MS - 1
    assert replies.tend(other) == 0
    assert replies.tend(writer) == 0  # renews its own
    clock.now += replies.LEASE_MS - 1
    assert replies.tend(other) == 0
    assert status(other, row_id) == ("streaming", "what was acknowledged")
    # The writer is gone: past its lease, any process ends the reply as interrupted.
    clock.now += 2
    assert replies.tend(other) == 1
    assert status(other, row_id) == ("interrupted", "what was acknowledged")
    assert status(writer, row_id) == ("interrupted", "what was acknowledged")
    # Its updates are refused now, and change nothing.
    with pytest.raises(InvalidParams) as raised:
        replies.update(writer, KEY, row_id, ReplyChange(content_delta="late"))
    assert raised.value.field == "id"
    assert replies.tend(other) == 0


def test_a_writers_exit_interrupts_only_its_own_replies(make_manager) -> None:
    first, second = make_manager(), make_manager()
    mine = streaming(first)
    theirs = replies.begin(second, Key("ws", "d"), ReplyBegin()).id
    assert replies.release(first) == 1
    assert status(second, mine) == ("interrupted", "partial")
    other = next(r for r in history.get(second, Key("ws", "d")).messages if r.id == theirs)
    assert other.status == "streaming"


def test_a_fork_of_a_streaming_conversation_copies_the_text_as_interrupted(
    make_manager,
) -> None:
    manager = make_manager()
    row_id = streaming(manager, "half ")
    replies.update(manager, KEY, row_id, ReplyChange(content_delta="an answer"))
    conversations.fork(manager, KEY, Key("ws", "copy"))
    copied = history.get(manager, Key("ws", "copy")).messages
    assert [(r.content, r.status) for r in copied] == [
        ("q", "complete"),
        ("half an answer", "interrupted"),
    ]
    assert status(manager, row_id) == ("streaming", "half an answer")


def test_many_updates_read_back_whole_across_folds(make_manager) -> None:
    manager = make_manager()
    row_id = streaming(manager, "")
    deltas = [f"[{i}:é]" for i in range(200)]
    for delta in deltas:
        replies.update(manager, KEY, row_id, ReplyChange(content_delta=delta))
    assert status(manager, row_id) == ("streaming", "".join(deltas))
    ended = replies.end(manager, KEY, row_id, "complete", ReplyChange()).message
    assert ended.content == "".join(deltas) and ended.tokens > 200
    totals = sum(r.tokens for r in history.get(manager, KEY).messages)
    assert conversations.info(manager, KEY).tokens == totals


@pytest.mark.parametrize("how", ["truncate", "delete_turns", "clear"])
def test_a_streaming_row_deleted_by_a_rewind_takes_its_reply_along(make_manager, how: str) -> None:
    manager = make_manager()
    row_id = streaming(manager)
    replies.update(manager, KEY, row_id, ReplyChange(content_delta=" and more"))
    if how == "truncate":
        edits.truncate(manager, KEY, row_id)
    elif how == "delete_turns":
        row = next(r for r in history.get(manager, KEY).messages if r.id == row_id)
        edits.delete_turns(manager, KEY, [row.turn])
    else:
        history.clear(manager, KEY)
    with pytest.raises(InvalidParams):
        replies.update(manager, KEY, row_id, ReplyChange(content_delta="late"))
    # Nothing streams now: a new reply may begin, and no lease is left to expire.
    assert replies.begin(manager, KEY, ReplyBegin()).status == "streaming"
    with manager.store.read() as reading:
        assert replies.held_by(reading, replies.writer(manager).name) != [(KEY, row_id)]
        assert len(replies.held_by(reading, replies.writer(manager).name)) == 1


def test_a_reply_renamed_by_rekeying_stays_its_writers_by_its_row_id(make_manager, clock) -> None:
    """Issue 43 item 1, the re-key that renames: an old spelling's conversation whose id is
    taken under the normalized one moves under a new id (service.workspaces.rekey_spellings).
    Its streaming reply goes with its row: one streaming row where it is now (1004), its writer
    updates and ends it by its row id under the key it began with, no other process can, and
    its lease's upkeep finds it there."""
    writer, other = make_manager(), make_manager()
    old, taken = Key("file:///C:/proj/", "c"), Key("file:///c:/proj", "c")
    history.append(writer, taken, [Message(role="user", content="already there")])
    history.append(writer, old, [Message(role="user", content="q")])
    started = ReplyBegin(message=Message(role="assistant", content="half"))
    row_id = replies.begin(writer, old, started).id

    writer.write((), lambda tx: workspaces.rekey_spellings(tx, clock.now))

    renamed = Key("file:///c:/proj", "c (moved)")
    assert [r.content for r in history.get(other, renamed).messages] == ["q", "half"]
    assert history.get(other, old).messages == ()
    with pytest.raises(ReplyInProgress):
        replies.begin(other, renamed, ReplyBegin())
    replies.begin(other, old, ReplyBegin())  # nothing streams under the old spelling now
    for key in (old, renamed):
        with pytest.raises(InvalidParams):
            replies.update(other, key, row_id, ReplyChange(content_delta="theirs"))
    assert replies.update(writer, old, row_id, ReplyChange(content_delta=" of it")) == 10
    clock.now += replies.LEASE_MS + 1  # the writer stalled past its lease
    assert replies.tend(other) == 1  # its own (begun under the old spelling) it renews
    interrupted = history.get(other, renamed).messages[-1]
    assert (interrupted.id, interrupted.status, interrupted.content) == (
        row_id,
        "interrupted",
        "half of it",
    )
    with pytest.raises(InvalidParams):
        replies.end(writer, old, row_id, "complete", ReplyChange())
    assert replies.tend(writer) == 0 and replies.writer(writer).held == {}


@pytest.mark.sqlite_only
def test_the_update_rate_admits_the_burst_then_the_rate_and_each_reply_alone() -> None:
    """The default bound on a clock the test moves: ``BURST_UPDATES`` at once, then
    ``UPDATES_PER_SECOND`` a second, never more than the burst saved up, per reply."""
    now = [100.0]
    writer = replies.Writer(clock=lambda: now[0])
    for _ in range(replies.BURST_UPDATES):
        writer.admit(1)
    with pytest.raises(InvalidParams) as refused:
        writer.admit(1)
    assert refused.value.field == "id"
    writer.admit(2)  # another reply has its own burst
    now[0] += 1.0
    for _ in range(int(replies.UPDATES_PER_SECOND)):
        writer.admit(1)
    with pytest.raises(InvalidParams):
        writer.admit(1)
    now[0] += 3600.0  # an hour idle saves up one burst, not more
    for _ in range(replies.BURST_UPDATES):
        writer.admit(1)
    with pytest.raises(InvalidParams):
        writer.admit(1)
    writer.ended(1)  # a reply begun again starts with a whole burst
    for _ in range(replies.BURST_UPDATES):
        writer.admit(1)
