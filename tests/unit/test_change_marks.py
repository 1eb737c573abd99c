"""The change marks (store.changes; issue 35 item 15) over real stores on one database, both
engines: another process's write costs a reader what it changed, not the whole workspace. The
cache keeps the conversations the write did not touch, the change watch re-reads only the
marked ones, and a database from before the marks opens and keeps working."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from tests.unit.conftest import MakeStore

from chat_history.model import Key, Message
from chat_history.policy.changes import Change
from chat_history.service import history, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch
from chat_history.settings import default_settings
from chat_history.store import Reading, changes
from chat_history.store.connection import Store
from chat_history.store.engine import sqlite3
from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, SCHEMA_VERSION, statements

W = "file:///w"

pytestmark = pytest.mark.engines


def two(make_store: MakeStore) -> tuple[ChatHistoryManager, ChatHistoryManager]:
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    return ChatHistoryManager(make_store(), settings), ChatHistoryManager(make_store(), settings)


def say(manager: ChatHistoryManager, conversation: str, text: str) -> int:
    stored = history.append(
        manager,
        Key(W, conversation),
        [Message(role="user", content=text), Message(role="assistant", content="ok " + text)],
    )
    return stored.messages[-1].id


def test_anothers_write_drops_only_the_conversations_it_changed_from_the_cache(
    make_store: MakeStore,
) -> None:
    mine, other = two(make_store)
    for conversation in ("a", "b"):
        say(other, conversation, "one")
        assert len(history.get(mine, Key(W, conversation)).messages) == 2  # now cached here
    assert len(mine.store.cache) == 2
    newest = say(other, "b", "two")
    # The next read sees b's new rows and still holds a (before the marks: the whole cache went).
    assert history.get(mine, Key(W, "b")).messages[-1].id == newest
    assert mine.store.cache.get(Key(W, "a")) is not None
    history.clear(other, Key(W, "a"))
    assert not history.get(mine, Key(W, "a")).messages


def test_a_move_marks_both_keys_of_each_conversation(make_store: MakeStore) -> None:
    mine, other = two(make_store)
    say(other, "c", "one")
    with mine.store.read() as reading:
        before = reading.change_position()
    workspaces.move(other, W, "file:///x")
    with mine.store.read() as reading:
        assert reading.change_position() > before
        # The key it left: its mark deleted with the floor raised past the reader (no name of a
        # gone history stays), so the reader checks it.
        assert not reading.changed_in(W, before)
        assert reading.change_floor() > before and not reading.conversation_ids(W)
        assert reading.changed_in("file:///x", before) == {"c"}
        assert reading.changed_in("file:///elsewhere", before) == set()


def test_a_cleared_conversation_is_told_to_a_watch_that_looked_before(
    make_store: MakeStore,
) -> None:
    """Its mark is deleted on both engines (the floor tells the watch to check): the other
    window still hears ``clear``, and its cache serves nothing stale."""
    mine, other = two(make_store)
    say(other, "a", "one")
    say(other, "b", "one")
    watch = ChangeWatch(mine.store, lambda: W)
    assert watch.poll() == []
    assert len(history.get(mine, Key(W, "a")).messages) == 2  # cached here
    history.clear(other, Key(W, "a"))
    say(other, "b", "two")
    told = {(c.conversation, c.reason) for c in watch.poll()}
    assert told == {("a", "clear"), ("b", "append")}
    assert not history.get(mine, Key(W, "a")).messages
    with other.store.read() as reading:
        left = reading.connection.execute(
            "SELECT COUNT(*) FROM change_marks WHERE conversation = ?", ("a",)
        ).fetchone()[0]
    assert left == 0  # no name of the cleared history is kept


def test_a_cleared_conversations_name_leaves_the_file(db_folder: Path) -> None:
    """SQLite: after ``clear`` the conversation's id is in no byte of the database's files
    (before, its change mark kept it)."""
    from tests.e2e.reliability import occurrences

    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    manager = ChatHistoryManager.open(db_folder / DATABASE_FILE, settings)
    try:
        name = "plan-for-the-acquisition-of-rival-corp"
        history.append(manager, Key(W, name), [Message(role="user", content="hello")])
        say(manager, "kept", "one")
        assert occurrences(db_folder, name) > 0, "the test could not fail"
        history.clear(manager, Key(W, name))
    finally:
        manager.close()
    assert occurrences(db_folder, name) == 0


def test_the_watch_reads_only_the_marked_conversations_after_its_first_look(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = two(make_store)
    for n in range(20):
        say(other, f"c{n}", "one")
    watch = ChangeWatch(mine.store, lambda: W)
    looks: list[str] = []
    real = Reading.fingerprints

    def counted(reading: Reading, workspace: str) -> object:
        looks.append(workspace)
        return real(reading, workspace)

    monkeypatch.setattr(Reading, "fingerprints", counted)
    assert watch.poll() == []
    assert looks == [W]  # the first look reads the workspace whole
    newest = say(other, "c7", "two")
    assert watch.poll() == [Change("c7", newest, "append")]
    history.clear(other, Key(W, "c3"))
    say(other, "new", "x")
    assert [(c.conversation, c.reason) for c in watch.poll()] == [
        ("c3", "clear"),
        ("new", "append"),
    ]
    assert looks == [W], "a later look reads the marks, not every conversation"


@pytest.mark.sqlite_only
def test_a_version_9_database_opens_and_its_changes_are_marked(db_folder: Path) -> None:
    db_folder.mkdir(mode=0o700)
    legacy = sqlite3.connect(db_folder / DATABASE_FILE, isolation_level=None)
    for version in range(9):
        for statement in statements(MIGRATIONS[version]):
            legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 9")
    legacy.close()
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    mine = ChatHistoryManager(Store(db_folder), settings)
    other = ChatHistoryManager(Store(db_folder), settings)
    try:
        watch = ChangeWatch(mine.store, lambda: W)
        assert watch.poll() == []
        newest = say(other, "c", "after the upgrade")
        assert watch.poll() == [Change("c", newest, "append")]
    finally:
        mine.store.close()
        other.store.close()
    check = sqlite3.connect(db_folder / DATABASE_FILE)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 16
        assert check.execute("SELECT seq FROM change_counter").fetchone()[0] == 1
        assert changes.changed_in(check, W, 0) == {"c"}
    finally:
        check.close()


@pytest.mark.sqlite_only
def test_a_fingerprint_costs_the_same_however_long_the_conversation(db_folder: Path) -> None:
    """Issue 36: the watch re-reads the fingerprint of each conversation a write touched, before
    its commit; its newest and oldest ids are index lookups, not a read of every row (an
    append to a conversation of 10,000 rows took ~5 ms). Counted in SQLite VM steps (apsw's
    progress handler), which do not depend on the machine: before, 2,000 rows cost 11,008
    steps and 10 rows 62."""
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    manager = ChatHistoryManager(Store(db_folder), settings)
    try:
        history.append(manager, Key(W, "short"), [Message(role="user", content="x")] * 10)
        for _ in range(4):
            history.append(manager, Key(W, "long"), [Message(role="user", content="x")] * 500)
        steps = []
        with manager.store.read() as reading:
            raw = reading.connection._raw  # the apsw connection
            for conversation in ("short", "long"):
                count = [0]

                def tick(count: list[int] = count) -> bool:
                    count[0] += 1
                    return False  # go on

                raw.set_progress_handler(tick, 10)
                found = reading.fingerprint(Key(W, conversation))
                raw.set_progress_handler(None)
                assert found is not None
                steps.append(count[0])
        assert found.count == 2_000
        assert steps[1] <= 2 * steps[0] + 5, steps
    finally:
        manager.store.close()
