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
from chat_history.service import conversations, edits, history
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
    history.append(
        manager,
        KEY,
        [U("old", timestamp=old), Message(role="assistant", content="ok", timestamp=old)],
    )
    created = clock.now
    clock.advance_hours(1)
    history.append(manager, KEY, [U("recent"), A("ok")])
    info = conversations.info(manager, KEY)
    assert (info.created_at, info.last_activity) == (created, clock.now)
    active = clock.now
    clock.advance_hours(1)
    assert history.get(manager, KEY).pruned is not None  # retention deleted the old turn ...
    info = conversations.info(manager, KEY)
    assert info.last_activity == active  # ... and that is not activity
    assert info.message_count == 2

    clock.advance_hours(1)
    history.save_summary(manager, KEY, "s")
    assert conversations.info(manager, KEY).last_activity == clock.now


def test_created_at_starts_again_once_a_conversation_stopped_existing(make_manager, clock) -> None:
    manager = make_manager({"maxAgeHours": 1})
    history.append(manager, KEY, [U("q"), A("a")])
    first = conversations.info(manager, KEY).created_at
    clock.advance_hours(2)
    assert history.get(manager, KEY).messages == ()  # the age rule emptied it: it no longer exists
    assert conversations.list_page(manager, "ws", None, None).conversations == ()
    assert conversations.info(manager, KEY).created_at is None
    history.append(manager, KEY, [U("again")])
    assert conversations.info(manager, KEY).created_at == clock.now != first

    clock.advance_hours(0.5)
    history.clear(manager, KEY)
    conversations.update(manager, KEY, ConversationUpdate(metadata={"k": 1}))
    assert conversations.info(manager, KEY).created_at == clock.now


def test_automatic_title_follows_the_rows(make_manager) -> None:
    manager = make_manager()
    stored = history.append(
        manager, KEY, [U("  "), U("[SOP: step]"), U("First  real\nprompt")]
    ).messages
    assert conversations.info(manager, KEY).title == "First real prompt"
    edits.truncate(manager, KEY, stored[2].id)
    info = conversations.info(manager, KEY)
    assert (info.title, info.title_source) == (None, None)
    history.append(manager, KEY, [U("x" * 100)])
    assert conversations.info(manager, KEY).title == "x" * 79 + "…"


def test_titles_and_metadata(make_manager) -> None:
    manager = make_manager()
    assert conversations.update(manager, KEY, ConversationUpdate(metadata={})).created_at is None
    assert conversations.list_page(manager, None, None, None).conversations == ()
    with pytest.raises(InvalidParams) as caught:
        conversations.update(manager, KEY, ConversationUpdate(set_title=True, title=" \t"))
    assert caught.value.field == "title"
    info = conversations.update(
        manager,
        KEY,
        ConversationUpdate(set_title=True, title="Named", metadata={"a": [1, {"b": None}]}),
    )
    assert (info.title, info.title_source, info.metadata.value()) == (
        "Named",
        "user",
        {"a": [1, {"b": None}]},
    )
    # the title alone keeps it in the listing; dropping both makes it go
    conversations.update(manager, KEY, ConversationUpdate(metadata={}))
    assert names(conversations.list_page(manager, "ws", None, None)) == ["conv"]
    conversations.update(manager, KEY, ConversationUpdate(set_title=True, title=None))
    assert names(conversations.list_page(manager, "ws", None, None)) == []


def test_listing_order_ties_and_paging(make_manager, clock) -> None:
    manager = make_manager()
    for workspace, conversation in [("w2", "b"), ("w1", "b"), ("w1", "a"), ("w1", "c")]:
        history.append(manager, Key(workspace, conversation), [U("q")])  # all in one millisecond
    clock.advance_hours(1)
    history.append(manager, Key("w1", "z"), [U("later")])
    every = conversations.list_page(manager, None, None, None)
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
        page = conversations.list_page(manager, None, 2, cursor)
        seen += [(i.workspace, i.conversation_id) for i in page.conversations]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [(i.workspace, i.conversation_id) for i in every.conversations]
    assert names(conversations.list_page(manager, "w1", 1, None)) == ["z"]


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
        for i in conversations.list_page(manager, "ws", None, None).conversations
    }
    assert set(listed) == {"conv", "untitled", "only-summary"}
    assert (listed["conv"].title, listed["conv"].title_source) == ("Old prompt", "auto")
    assert listed["conv"].created_at == t and listed["conv"].last_activity == t + 20
    assert listed["conv"].message_count == 3 and listed["untitled"].title is None
    assert listed["only-summary"].has_summary and listed["only-summary"].created_at == t
    assert [r.content for r in history.get(manager, KEY).messages] == [
        "sys",
        "  Old   prompt ",
        "answer",
    ]
    assert history.append(manager, KEY, [U("next")]).messages[0].turn == 2
    connection = sqlite3.connect(db_folder / DATABASE_FILE)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()
