"""Conversation records through the manager on real SQLite files (protocol.md "Version 2" →
Conversations): createdAt and lastActivity, the automatic and the client's title, metadata, the
listing's order and paging, and the migration that gives every old conversation a record."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.unit.conftest import HOUR

from chat_history.errors import InvalidParams
from chat_history.model import Key, Message
from chat_history.service.conversations import ConversationUpdate
from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, SCHEMA_VERSION

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")


def U(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def names(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.conversation_id for i in page.conversations]


def test_created_and_active_times_follow_client_writes_only(make_manager, clock) -> None:
    manager = make_manager({"maxAgeHours": 10})
    old = clock.now - 9 * HOUR
    manager.append(
        KEY, [U("old", timestamp=old), Message(role="assistant", content="ok", timestamp=old)]
    )
    created = clock.now
    clock.advance_hours(1)
    manager.append(KEY, [U("recent"), A("ok")])
    info = manager.conversation(KEY)
    assert (info.created_at, info.last_activity) == (created, clock.now)
    active = clock.now
    clock.advance_hours(1)
    assert manager.get(KEY).pruned is not None  # retention deleted the old turn ...
    info = manager.conversation(KEY)
    assert info.last_activity == active  # ... and that is not activity
    assert info.message_count == 2

    clock.advance_hours(1)
    manager.save_summary(KEY, "s")
    assert manager.conversation(KEY).last_activity == clock.now


def test_created_at_starts_again_once_a_conversation_stopped_existing(make_manager, clock) -> None:
    manager = make_manager({"maxAgeHours": 1})
    manager.append(KEY, [U("q"), A("a")])
    first = manager.conversation(KEY).created_at
    clock.advance_hours(2)
    assert manager.get(KEY).messages == ()  # the age rule emptied it: it no longer exists
    assert manager.list_conversations_page("ws", None, None).conversations == ()
    assert manager.conversation(KEY).created_at is None
    manager.append(KEY, [U("again")])
    assert manager.conversation(KEY).created_at == clock.now != first

    clock.advance_hours(0.5)
    manager.clear(KEY)
    manager.update_conversation(KEY, ConversationUpdate(metadata={"k": 1}))
    assert manager.conversation(KEY).created_at == clock.now


def test_automatic_title_follows_the_rows(make_manager) -> None:
    manager = make_manager()
    stored = manager.append(KEY, [U("  "), U("[SOP: step]"), U("First  real\nprompt")]).messages
    assert manager.conversation(KEY).title == "First real prompt"
    manager.truncate(KEY, stored[2].id)
    info = manager.conversation(KEY)
    assert (info.title, info.title_source) == (None, None)
    manager.append(KEY, [U("x" * 100)])
    assert manager.conversation(KEY).title == "x" * 79 + "…"


def test_titles_and_metadata(make_manager) -> None:
    manager = make_manager()
    assert manager.update_conversation(KEY, ConversationUpdate(metadata={})).created_at is None
    assert manager.list_conversations_page(None, None, None).conversations == ()
    with pytest.raises(InvalidParams) as caught:
        manager.update_conversation(KEY, ConversationUpdate(set_title=True, title=" \t"))
    assert caught.value.field == "title"
    info = manager.update_conversation(
        KEY, ConversationUpdate(set_title=True, title="Named", metadata={"a": [1, {"b": None}]})
    )
    assert (info.title, info.title_source, info.metadata.value()) == (
        "Named",
        "user",
        {"a": [1, {"b": None}]},
    )
    # the title alone keeps it in the listing; dropping both makes it go
    manager.update_conversation(KEY, ConversationUpdate(metadata={}))
    assert names(manager.list_conversations_page("ws", None, None)) == ["conv"]
    manager.update_conversation(KEY, ConversationUpdate(set_title=True, title=None))
    assert names(manager.list_conversations_page("ws", None, None)) == []


def test_listing_order_ties_and_paging(make_manager, clock) -> None:
    manager = make_manager()
    for workspace, conversation in [("w2", "b"), ("w1", "b"), ("w1", "a"), ("w1", "c")]:
        manager.append(Key(workspace, conversation), [U("q")])  # all in one millisecond
    clock.advance_hours(1)
    manager.append(Key("w1", "z"), [U("later")])
    every = manager.list_conversations_page(None, None, None)
    assert [(i.workspace, i.conversation_id) for i in every.conversations] == [
        ("w1", "z"),
        ("w1", "a"),
        ("w1", "b"),
        ("w2", "b"),
        ("w1", "c"),
    ]
    assert every.next_cursor is None
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(10):
        page = manager.list_conversations_page(None, 2, cursor)
        seen += [(i.workspace, i.conversation_id) for i in page.conversations]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [(i.workspace, i.conversation_id) for i in every.conversations]
    assert names(manager.list_conversations_page("w1", 1, None)) == ["z"]


@pytest.mark.sqlite_only
def test_a_version_3_database_gets_records_titles_and_created_times(
    db_folder: Path, make_manager, clock
) -> None:
    db_folder.mkdir(mode=0o700)
    legacy = sqlite3.connect(db_folder / DATABASE_FILE)
    for version in (0, 1, 2):
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 3")
    t = clock.now - 5 * HOUR
    legacy.executemany(
        "INSERT INTO messages (id, workspace, conversation, turn, role, content, timestamp, "
        "tokens) VALUES (?, 'ws', ?, ?, ?, ?, ?, 5)",
        [
            (1, "conv", 0, "system", "sys", t),
            (2, "conv", 1, "user", "  Old   prompt ", t + 10),
            (3, "conv", 1, "assistant", "answer", t + 20),
            (4, "untitled", 0, "assistant", "no prompt", t + 30),
        ],
    )
    legacy.executemany(
        "INSERT INTO conversations VALUES ('ws', ?, ?, 15, 1, ?, ?, ?)",
        [("conv", 3, 2, t, t + 20), ("untitled", 1, 4, t + 30, t + 30)],
    )
    legacy.execute("INSERT INTO summaries VALUES ('ws', 'only-summary', 'kept', ?, NULL)", (t,))
    legacy.commit()
    legacy.close()

    manager = make_manager()
    listed = {
        i.conversation_id: i
        for i in manager.list_conversations_page("ws", None, None).conversations
    }
    assert set(listed) == {"conv", "untitled", "only-summary"}
    assert (listed["conv"].title, listed["conv"].title_source) == ("Old prompt", "auto")
    assert listed["conv"].created_at == t and listed["conv"].last_activity == t + 20
    assert listed["conv"].message_count == 3 and listed["untitled"].title is None
    assert listed["only-summary"].has_summary and listed["only-summary"].created_at == t
    assert [r.content for r in manager.get(KEY).messages] == ["sys", "  Old   prompt ", "answer"]
    assert manager.append(KEY, [U("next")]).messages[0].turn == 2
    connection = sqlite3.connect(db_folder / DATABASE_FILE)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()
