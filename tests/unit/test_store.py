"""The SQLite store on real files (semantics.md, "Storage"; protocol.md StorageError): an
owner-only file, WAL, secure_delete, a versioned schema that refuses newer files and leaves
foreign files untouched, deleted text gone from every database file, several processes sharing
the file, and a cache that never serves what another connection changed."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chat_history.errors import InvalidParams, StorageError
from chat_history.model import Message, StoredMessage, ToolCall
from chat_history.service import history
from chat_history.store import Key
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, SCHEMA_VERSION

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")
HOUR = 3_600_000


def U(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def contents(rows: tuple[StoredMessage, ...] | list[StoredMessage]) -> list[str]:
    return [row.content for row in rows]


def pragma(path: Path, name: str) -> object:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        connection.close()


def database_files(folder: Path) -> dict[str, bytes]:
    return {
        suffix: Path(str(folder / DATABASE_FILE) + suffix).read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(str(folder / DATABASE_FILE) + suffix).exists()
    }


def occurrences(folder: Path, secret: str) -> dict[str, int]:
    needle = secret.encode("utf-8")
    return {suffix: data.count(needle) for suffix, data in database_files(folder).items()}


# -- the file --------------------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_folder_is_created_and_the_file_is_owner_only(make_manager, tmp_path: Path) -> None:
    folder = tmp_path / "not" / "yet" / "there"
    manager = make_manager(folder=folder)
    history.append(manager, KEY, [U("hello")])
    assert folder.is_dir()
    assert stat.S_IMODE((folder / DATABASE_FILE).stat().st_mode) == 0o600
    for side in ("-wal", "-shm"):
        path = Path(str(folder / DATABASE_FILE) + side)
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, side
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0


@pytest.mark.sqlite_only
def test_database_uses_wal_and_secure_delete(make_manager, db_folder: Path) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("hello")])
    assert pragma(db_folder / DATABASE_FILE, "journal_mode") == "wal"
    with manager.store.read() as transaction:
        connection = transaction.connection
        assert connection.execute("PRAGMA secure_delete").fetchone()[0] == 1
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] >= 5_000


@pytest.mark.sqlite_only
def test_schema_version_is_recorded(make_manager, db_folder: Path) -> None:
    history.append(make_manager(), KEY, [U("hello")])
    assert SCHEMA_VERSION == 16
    assert pragma(db_folder / DATABASE_FILE, "user_version") == SCHEMA_VERSION


@pytest.mark.sqlite_only
def test_rows_survive_reopening(make_manager, db_folder: Path) -> None:
    first = make_manager()
    history.append(first, KEY, [U("kept"), A("also kept")])
    first.store.close()
    again = make_manager()
    assert contents(history.get(again, KEY).messages) == ["kept", "also kept"]
    assert pragma(db_folder / DATABASE_FILE, "user_version") == SCHEMA_VERSION


@pytest.mark.sqlite_only
def test_a_newer_schema_is_refused_and_the_file_left_unchanged(
    make_manager, db_folder: Path
) -> None:
    db_folder.mkdir()
    path = db_folder / DATABASE_FILE
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE future (x TEXT)")
    connection.execute("INSERT INTO future VALUES ('from a newer server')")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.commit()
    connection.close()
    before = path.read_bytes()

    manager = make_manager()
    with pytest.raises(StorageError) as caught:
        history.append(manager, KEY, [U("hello")])
    assert "newer" in caught.value.reason
    with pytest.raises(StorageError):
        history.get(manager, KEY)

    assert path.read_bytes() == before
    assert pragma(path, "user_version") == SCHEMA_VERSION + 1


@pytest.mark.sqlite_only
def test_a_file_that_is_not_sqlite_is_refused_and_left_unchanged(
    make_manager, db_folder: Path
) -> None:
    db_folder.mkdir()
    path = db_folder / DATABASE_FILE
    garbage = b"these are my notes, not a database\n" * 200
    path.write_bytes(garbage)

    manager = make_manager()
    with pytest.raises(StorageError):
        history.get(manager, KEY)
    with pytest.raises(StorageError):
        history.append(manager, KEY, [U("hello")])

    assert path.read_bytes() == garbage
    assert sorted(p.name for p in db_folder.iterdir()) == [DATABASE_FILE]


@pytest.mark.sqlite_only
def test_storage_is_retried_after_a_failure(make_manager, db_folder: Path) -> None:
    db_folder.mkdir()
    path = db_folder / DATABASE_FILE
    path.write_bytes(b"garbage" * 100)
    manager = make_manager()
    with pytest.raises(StorageError):
        history.get(manager, KEY)
    path.unlink()
    history.append(manager, KEY, [U("works now")])
    assert contents(history.get(manager, KEY).messages) == ["works now"]


@pytest.mark.sqlite_only
def test_an_unusable_folder_is_a_storage_error(make_manager, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x")
    manager = make_manager(folder=blocker / "storage")
    with pytest.raises(StorageError):
        history.append(manager, KEY, [U("hello")])


# -- deleted text is gone from every file ----------------------------------------------------------


SECRET = "SECRET-7f3a9c2e-d41b-4e8a-9b6c-0123456789ab"


def secret_turn(large: bool) -> list[Message]:
    padding = "p" * 12_000 if large else ""  # large: the row spills into overflow pages
    return [U(f"my password is {SECRET}{padding}{SECRET}"), A(f"noted: {SECRET}")]


def assert_secret_on_disk(folder: Path) -> None:
    assert sum(occurrences(folder, SECRET).values()) > 0, "the test could not fail"


def assert_secret_gone(folder: Path) -> None:
    assert occurrences(folder, SECRET) == {suffix: 0 for suffix in database_files(folder)}


@pytest.mark.sqlite_only
@pytest.mark.parametrize("large", [False, True], ids=["small", "overflow"])
def test_clear_leaves_no_residue(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("before"), A("ok")])
    history.append(manager, KEY, secret_turn(large))
    history.save_summary(manager, KEY, f"summary mentioning {SECRET}")
    history.append(manager, Key("ws", "other"), [U("another conversation")])
    assert_secret_on_disk(db_folder)

    assert history.clear(manager, KEY) == 4

    assert history.get(manager, KEY).messages == ()
    assert_secret_gone(db_folder)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("large", [False, True], ids=["small", "overflow"])
def test_age_rule_leaves_no_residue(make_manager, clock, db_folder: Path, large: bool) -> None:
    manager = make_manager({"maxAgeHours": 10})
    turn = secret_turn(large)
    old = clock.now - 9 * HOUR  # an imported turn, still young enough to be kept
    history.append(
        manager, KEY, [Message(role=m.role, content=m.content, timestamp=old) for m in turn]
    )
    history.append(manager, KEY, [U("recent"), A("ok")])
    assert_secret_on_disk(db_folder)
    clock.advance_hours(2)

    result = history.get(manager, KEY)

    assert result.pruned is not None and result.pruned.reasons == ("age",)
    assert contents(result.messages) == ["recent", "ok"]
    assert_secret_gone(db_folder)


def test_an_expired_import_leaves_no_residue(make_manager, clock, db_folder: Path) -> None:
    manager = make_manager({"maxAgeHours": 10})
    history.append(manager, KEY, [U("recent"), A("ok")])
    expired = [
        Message(role=m.role, content=m.content, timestamp=clock.now - 20 * HOUR)
        for m in secret_turn(large=False)
    ]
    result = history.append(manager, KEY, expired)
    assert result.pruned is not None and result.pruned.reasons == ("age",)
    assert contents(history.get(manager, KEY).messages) == ["recent", "ok"]
    assert_secret_gone(db_folder)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("large", [False, True], ids=["small", "overflow"])
def test_count_rule_leaves_no_residue(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager({"maxMessages": 2})
    history.append(manager, KEY, secret_turn(large))
    assert_secret_on_disk(db_folder)

    result = history.append(manager, KEY, [U("next"), A("ok")])

    assert result.pruned is not None and result.pruned.reasons == ("count",)
    assert_secret_gone(db_folder)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("large", [False, True], ids=["small", "overflow"])
def test_token_rule_leaves_no_residue(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager({"maxTokens": 40})
    history.append(manager, KEY, secret_turn(large))
    assert_secret_on_disk(db_folder)

    result = history.append(manager, KEY, [U("next"), A("ok")])

    assert result.pruned is not None and result.pruned.reasons == ("tokens",)
    assert_secret_gone(db_folder)


@pytest.mark.sqlite_only
def test_an_expired_summary_leaves_no_residue(make_manager, clock, db_folder: Path) -> None:
    manager = make_manager({"maxAgeHours": 1})
    history.save_summary(manager, KEY, f"summary mentioning {SECRET}")
    assert_secret_on_disk(db_folder)
    clock.advance_hours(2)
    history.append(manager, KEY, [U("fresh")])
    assert history.get_summary(manager, KEY) is None
    assert_secret_gone(db_folder)


# -- several processes -----------------------------------------------------------------------------


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from chat_history.service import history
    from chat_history.service.manager import ChatHistoryManager
    from chat_history.model import Message
    from chat_history.settings import load_settings
    from chat_history.store import Key, Store

    folder, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    settings = load_settings({"enableAutoPruning": False}).settings
    manager = ChatHistoryManager(Store(folder), settings)
    key = Key("ws", "shared")
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        history.append(manager, key, [Message(role="user", content=f"{tag}-{i}"),
                                      Message(role="assistant", content=f"{tag}-{i}-reply")])
        if i % 10 == 0:
            history.get(manager, key)
    manager.store.close()
    """
)


@pytest.mark.sqlite_only
def test_two_processes_append_to_one_conversation_without_losing_a_row(
    make_manager, db_folder: Path
) -> None:
    count = 60
    history.append(make_manager(), Key("ws", "warm-up"), [U("create the file first")])
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_folder), tag, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    for writer in writers:  # start both at once
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err

    rows = history.get(make_manager({"enableAutoPruning": False}), Key("ws", "shared")).messages
    assert len(rows) == 4 * count
    assert [row.id for row in rows] == sorted({row.id for row in rows})
    for tag in ("A", "B"):
        mine = [row.content for row in rows if row.content.startswith(tag + "-")]
        expected = [text for i in range(count) for text in (f"{tag}-{i}", f"{tag}-{i}-reply")]
        assert mine == expected
    # Each append is one transaction: a reply directly follows its prompt, and turn numbers are
    # 1, 2, … with no two appends reading the same last turn.
    for prompt, reply in zip(rows[::2], rows[1::2], strict=True):
        assert reply.content == prompt.content + "-reply"
        assert reply.turn == prompt.turn
    assert [row.turn for row in rows[::2]] == list(range(1, 2 * count + 1))


# -- ids -------------------------------------------------------------------------------------------


def ids(rows: tuple[StoredMessage, ...] | list[StoredMessage]) -> list[int]:
    return [row.id for row in rows]


def test_ids_are_never_handed_out_twice_after_clearing_the_newest_rows(make_manager) -> None:
    manager = make_manager()
    other = Key("ws", "other")
    history.append(manager, other, [U("kept")])
    first = ids(history.append(manager, KEY, [U("q1"), A("a1"), U("q2")]).messages)
    assert history.clear(manager, KEY) == 3
    again = ids(history.append(manager, KEY, [U("again")]).messages)
    assert again[0] > max(first)
    # ... also when another connection deleted them, and for the rows it deletes by retention
    pruning = make_manager({"maxMessages": 1})
    newest = ids(history.append(pruning, KEY, [A("extra"), U("q3"), A("a3")]).messages)
    assert contents(history.get(pruning, KEY).messages) == ["q3", "a3"]
    assert history.clear(pruning, KEY) == 2
    assert ids(history.append(manager, KEY, [U("after")]).messages)[0] > max(newest)
    assert ids(history.append(manager, other, [U("later")]).messages)[0] > max(newest) + 1


@pytest.mark.sqlite_only
def test_a_version_2_database_migrates_with_every_row_and_id(
    db_folder: Path, make_manager, clock
) -> None:
    db_folder.mkdir(mode=0o700)
    legacy = sqlite3.connect(db_folder / DATABASE_FILE)
    for version in (0, 1):
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 2")
    legacy.executemany(
        "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, tokens) "
        "VALUES ('ws', 'conv', ?, ?, ?, ?, 5)",
        [
            (1, "user", "q1", clock.now),
            (1, "assistant", "a1", clock.now),
            (2, "user", "q2", clock.now),
            (2, "assistant", "gone", clock.now),
        ],
    )
    legacy.execute("DELETE FROM messages WHERE content = 'gone'")  # id 4 was handed out
    legacy.execute(
        "INSERT INTO conversations VALUES ('ws', 'conv', 3, 15, 2, 3, ?, ?)", (clock.now, clock.now)
    )
    legacy.commit()
    legacy.close()

    manager = make_manager()
    stored = history.get(manager, KEY).messages
    assert [(r.id, r.content) for r in stored] == [(1, "q1"), (2, "a1"), (3, "q2")]
    assert ids(history.append(manager, KEY, [A("a2")]).messages) == [5]
    assert pragma(db_folder / DATABASE_FILE, "user_version") == SCHEMA_VERSION
    connection = sqlite3.connect(db_folder / DATABASE_FILE)
    try:
        indexes = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
        assert "conversations_by_activity" not in indexes
        assert {"messages_by_conversation", "messages_system", "id_floor"} <= indexes
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()


# -- what one connection remembers of another's writes ---------------------------------------------


def result_of(call_id: str) -> Message:
    return Message(role="tool", content=f"result {call_id}", tool_call_id=call_id, name="read")


def two_calls() -> Message:
    calls = tuple(ToolCall(id=i, name="read", arguments={}) for i in ("c1", "c2"))
    return Message(role="assistant", tool_calls=calls)


def test_append_sees_a_tool_result_another_connection_wrote(make_manager) -> None:
    a = make_manager()
    b = make_manager()
    history.append(a, KEY, [U("q"), two_calls()])
    history.append(a, KEY, [result_of("c1")])  # a has now read (and remembers) the running turn
    history.append(b, KEY, [result_of("c2")])
    with pytest.raises(InvalidParams) as refused:
        history.append(a, KEY, [result_of("c2")])  # already answered through the other connection
    assert refused.value.field == "messages[0].tool_call_id"
    assert "answers no pending tool call" in refused.value.why
    history.append(a, KEY, [A("done"), U("next")])
    with a.store.read() as transaction:
        totals = transaction.totals(KEY)
    assert totals is not None and totals.message_count == 6
    assert contents(history.get(b, KEY).messages) == [
        "q",
        "",
        "result c1",
        "result c2",
        "done",
        "next",
    ]


def test_append_after_another_connection_cleared_starts_a_new_conversation(make_manager) -> None:
    a = make_manager()
    b = make_manager()
    history.append(a, KEY, [U("q"), two_calls()])
    history.append(a, KEY, [result_of("c1")])
    history.clear(b, KEY)
    with pytest.raises(InvalidParams):
        history.append(a, KEY, [result_of("c2")])
    stored = history.append(a, KEY, [U("fresh")]).messages
    assert [(r.turn, r.content) for r in stored] == [(1, "fresh")]
    with a.store.read() as transaction:
        totals = transaction.totals(KEY)
    assert totals is not None and (totals.message_count, totals.turn_start_id) == (1, stored[0].id)


def test_a_failed_append_leaves_nothing_remembered(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q"), two_calls()])
    history.append(manager, KEY, [result_of("c1")])
    with pytest.raises(InvalidParams):  # the second row is refused: nothing of the call lands
        history.append(manager, KEY, [result_of("c2"), result_of("c9")])
    history.append(manager, KEY, [result_of("c2")])
    assert contents(history.get(manager, KEY).messages) == ["q", "", "result c1", "result c2"]


# -- the cache -------------------------------------------------------------------------------------


def test_cache_is_not_stale_after_another_connection_clears(make_manager) -> None:
    a = make_manager()
    b = make_manager()
    history.append(a, KEY, [U("hello"), A("hi")])
    assert contents(history.get(a, KEY).messages) == ["hello", "hi"]
    assert len(a.store.cache) == 1

    assert history.clear(b, KEY) == 2

    assert history.get(a, KEY).messages == ()


def test_cache_is_not_stale_after_another_connection_appends_or_prunes(make_manager) -> None:
    a = make_manager({"maxMessages": 100})
    b = make_manager({"maxMessages": 2})
    history.append(a, KEY, [U("u1"), A("a1")])
    assert contents(history.get(a, KEY).messages) == ["u1", "a1"]

    history.append(b, KEY, [U("u2"), A("a2")])

    assert contents(history.get(a, KEY).messages) == ["u2", "a2"]
    history.append(a, KEY, [U("u3")])
    assert contents(history.get(a, KEY).messages) == ["u2", "a2", "u3"]
    assert contents(history.get(b, KEY).messages) == ["u3"]


def test_clear_purges_the_cache_of_the_same_manager(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("hello")])
    history.get(manager, KEY)
    history.clear(manager, KEY)
    assert history.get(manager, KEY).messages == ()
    history.append(manager, KEY, [U("again")])
    assert contents(history.get(manager, KEY).messages) == ["again"]


def test_cached_history_follows_this_process_appends_and_pruning(make_manager) -> None:
    manager = make_manager({"maxMessages": 3})
    history.append(manager, KEY, [U("u1"), A("a1")])
    history.get(manager, KEY)
    history.append(manager, KEY, [U("u2"), A("a2")])
    assert contents(history.get(manager, KEY).messages) == ["u2", "a2"]
    with manager.store.read() as transaction:
        assert contents(transaction.rows_from(KEY, 0)) == ["u2", "a2"]


def test_store_cache_is_bounded(make_manager) -> None:
    manager = make_manager(cache_conversations=2, cache_rows=5)
    for name in ("c1", "c2", "c3", "c4"):
        history.append(manager, Key("ws", name), [U(name + " q"), A(name + " a")])
        history.get(manager, Key("ws", name))
        assert len(manager.store.cache) <= 2
        assert manager.store.cache.rows <= 5
    for name in ("c1", "c2", "c3", "c4"):
        assert contents(history.get(manager, Key("ws", name)).messages) == [
            name + " q",
            name + " a",
        ]


def rows_of(n: int, start: int = 1) -> list[StoredMessage]:
    return [
        StoredMessage(role="user", content=str(i), timestamp=0, id=i, turn=i, tokens=5)
        for i in range(start, start + n)
    ]


def test_conversation_cache_evicts_the_least_recently_used_conversation() -> None:
    cache = ConversationCache(max_conversations=2, max_rows=100)
    k1, k2, k3 = Key("w", "1"), Key("w", "2"), Key("w", "3")
    cache.put(k1, rows_of(1))
    cache.put(k2, rows_of(1))
    assert cache.get(k1) is not None  # k1 is now the most recent
    cache.put(k3, rows_of(1))
    assert cache.get(k2) is None
    assert cache.get(k1) is not None and cache.get(k3) is not None
    assert len(cache) == 2


def test_conversation_cache_is_bounded_by_rows() -> None:
    cache = ConversationCache(max_conversations=10, max_rows=10)
    cache.put(Key("w", "1"), rows_of(6))
    cache.put(Key("w", "2"), rows_of(6))
    assert cache.rows <= 10
    assert cache.get(Key("w", "1")) is None
    cache.put(Key("w", "big"), rows_of(11))
    assert cache.get(Key("w", "big")) is None
    assert cache.rows <= 10


def test_conversation_cache_extend_and_remove_keep_the_row_count() -> None:
    cache = ConversationCache(max_conversations=10, max_rows=10)
    key = Key("w", "1")
    cache.extend(key, rows_of(3))  # not cached: nothing to extend
    assert cache.get(key) is None and cache.rows == 0
    cache.put(key, rows_of(3))
    cache.extend(key, rows_of(2, start=4))
    assert [row.id for row in cache.get(key) or []] == [1, 2, 3, 4, 5]
    cache.remove_ids(key, {1, 4})
    assert [row.id for row in cache.get(key) or []] == [2, 3, 5]
    assert cache.rows == 3
    cache.extend(key, rows_of(8, start=6))  # 11 rows > 10: evicted
    assert cache.get(key) is None and cache.rows == 0


def test_conversation_cache_returns_copies() -> None:
    cache = ConversationCache(max_conversations=2, max_rows=10)
    key = Key("w", "1")
    cache.put(key, rows_of(2))
    got = cache.get(key)
    assert got is not None
    got.clear()
    assert len(cache.get(key) or []) == 2


@pytest.mark.sqlite_only
def test_store_module_keeps_files_private_under_a_permissive_umask(
    make_manager, tmp_path: Path
) -> None:
    old = os.umask(0)
    try:
        manager = make_manager(folder=tmp_path / "open-umask")
        history.append(manager, KEY, [U("hello")])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "open-umask" / DATABASE_FILE).stat().st_mode) == 0o600
