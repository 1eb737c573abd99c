"""Storage over the real server process: deleted text leaves no byte in the database files (by
age, count, tokens, clear); a damaged, foreign, unwritable or full storage answers 1002 with a
reason while the server keeps answering, and the file is never overwritten or deleted; a
first-version database is migrated with every row; a newer one is refused untouched; files and
folder are owner-only."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.reliability import (
    KEEP_ALL,
    SUFFIXES,
    Server,
    assistant,
    database_bytes,
    database_path,
    is_root,
    occurrences,
    run,
    start,
    user,
)

from chat_history.store.schema import MIGRATIONS, SCHEMA_VERSION

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

PAGE = 4096


def storage_error(server: Server, method: str, params: dict[str, Any]) -> str:
    """The reason of the 1002 answer ``method`` must get."""
    answer = server.request(method, params)
    assert "error" in answer, answer
    assert answer["error"]["code"] == 1002, answer
    reason = answer["error"]["data"]["reason"]
    assert isinstance(reason, str) and reason
    return reason


# -- residue ----------------------------------------------------------------------------------


def _secret(size: str) -> tuple[str, str]:
    """(text, needle): a short secret, or 20 KB (overflow pages) made of one unique token, so a
    fragment left anywhere is still found."""
    token = f"SECRET{uuid.uuid4().hex}"
    return (token, token) if size == "short" else (" ".join([token] * 600), token)


OLD = 1_577_836_800_000  # 2020-01-01: older than any maxAgeHours below


@pytest.mark.sqlite_only  # SQLite's file and -wal bytes (PostgreSQL's: test_postgres.py)
@pytest.mark.parametrize("size", ["short", "20 KB"])
@pytest.mark.parametrize("path", ["age", "count", "tokens", "clear", "summary clear"])
def test_deleted_text_leaves_no_byte_in_the_database_files(
    tmp_path: Path, path: str, size: str
) -> None:
    text, needle = _secret(size)
    folder = tmp_path / "store"
    settings = {
        "age": {**KEEP_ALL},  # the age rule is switched on after the secret is on disk
        "count": {**KEEP_ALL, "maxMessages": 2},
        "tokens": {**KEEP_ALL, "maxTokens": 100},
        "clear": KEEP_ALL,
        "summary clear": KEEP_ALL,
    }[path]
    server = start(folder, settings)
    try:
        if path == "summary clear":
            server.ok("chatHistory/saveSummary", {"conversationId": "c", "summary": text})
        else:
            server.append("c", user(text, timestamp=OLD), assistant("noted", timestamp=OLD))
        assert occurrences(folder, needle) > 0, "the secret never reached the files"

        if path == "age":
            server.notify(
                "workspace/didChangeConfiguration",
                {"settings": {"chatHistory": {**KEEP_ALL, "maxAgeHours": 1}}},
            )
            pruned = server.ok("chatHistory/get", {"conversationId": "c"})["pruned"]
            assert pruned["reasons"] == ["age"]
        elif path in ("count", "tokens"):
            pruned = server.append("c", user("x" * 400), assistant("ok"))["pruned"]
            assert pruned["reasons"] == [path]
        else:
            server.ok("chatHistory/clear", {"conversationId": "c"})
        assert all(needle not in r["content"] for r in server.get("c"))

        assert occurrences(folder, needle) == 0
        assert set(database_bytes(folder)) >= {""}
    finally:
        server.close()
    assert occurrences(folder, needle) == 0  # nor after the last connection closed


# -- damaged or foreign files -------------------------------------------------------------------


def _make_database(folder: Path) -> None:
    """A real database of several pages: conversation c1 first (its rows fill the early pages),
    then c2."""
    server = start(folder, KEEP_ALL)
    try:
        for conversation in ("c1", "c2"):
            for i in range(8):
                server.append(conversation, user(f"{conversation}-row-{i} " + "x" * 2_000))
    finally:
        server.close()  # the last connection checkpoints the WAL into the file
    assert set(database_bytes(folder)) == {""}


def _garbage(size: int) -> bytes:
    return random.Random(7).randbytes(size)


DAMAGE = {
    "garbage after the header": lambda data: data[:100] + _garbage(len(data) - 100),
    "garbage after the first page": lambda data: data[:PAGE] + _garbage(len(data) - PAGE),
    "truncated pages": lambda data: data[: len(data) // 2],
    "not SQLite": lambda data: b"name,value\nthis is,a spreadsheet\n" * 200,
}


@pytest.mark.sqlite_only  # a damaged SQLite file
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_or_foreign_file_is_refused_untouched_and_the_server_keeps_answering(
    tmp_path: Path, damage: str
) -> None:
    folder = tmp_path / "store"
    _make_database(folder)
    file = database_path(folder)
    file.write_bytes(DAMAGE[damage](file.read_bytes()))
    before = file.read_bytes()
    server = start(folder, KEEP_ALL)
    try:
        for method, params in (
            ("chatHistory/get", {"conversationId": "c1"}),
            ("chatHistory/append", {"conversationId": "c1", "messages": [user("new")]}),
            ("chatHistory/append", {"conversationId": "fresh", "messages": [user("new")]}),
            ("chatHistory/saveSummary", {"conversationId": "c2", "summary": "s"}),
            ("chatHistory/clear", {"conversationId": "c2"}),
            ("chatHistory/listConversations", {}),
        ):
            storage_error(server, method, params)
            assert server.alive()
    finally:
        server.close()
    assert file.read_bytes() == before


@pytest.mark.sqlite_only  # SQLite's corruption report
def test_after_sqlite_reports_corruption_nothing_more_is_written_to_the_file(
    tmp_path: Path,
) -> None:
    """Found here: with only c1's pages damaged, reading c1 answered 1002 but appends to c1 and
    to other conversations still went into the damaged file. Now the file is refused from the
    first corruption report until it is replaced, and then the server carries on."""
    folder = tmp_path / "store"
    _make_database(folder)
    file = database_path(folder)
    data = bytearray(file.read_bytes())
    pages = {data.find(b"c1-row-%d " % i) // PAGE for i in range(8)}
    assert 0 not in pages and -1 not in pages
    for page in pages:
        data[page * PAGE : (page + 1) * PAGE] = _garbage(PAGE)
    file.write_bytes(bytes(data))
    before = file.read_bytes()
    server = start(folder, KEEP_ALL)
    try:
        reason = storage_error(server, "chatHistory/get", {"conversationId": "c1"})
        assert "malformed" in reason
        for conversation in ("c1", "c2", "fresh"):
            reason = storage_error(
                server,
                "chatHistory/append",
                {"conversationId": conversation, "messages": [user("into a damaged file?")]},
            )
            assert "damaged" in reason
        assert file.read_bytes() == before

        file.rename(folder / "damaged-copy.sqlite3")  # what a user does with a damaged file
        for suffix in SUFFIXES[1:]:
            Path(f"{file}{suffix}").unlink(missing_ok=True)
        server.append("fresh", user("a new start"))
        assert [r["content"] for r in server.get("fresh")] == ["a new start"]
    finally:
        server.close()
    assert (folder / "damaged-copy.sqlite3").read_bytes() == before


# -- unwritable and full storage -------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(mount_point: Path, options: str) -> Iterator[Path]:
    """A tmpfs at ``mount_point`` (root only), always unmounted afterwards."""
    mount_point.mkdir(parents=True, exist_ok=True)
    result = run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)])
    # CI runs as root on this machine kind; a failing mount is an environment change to see.
    assert result.returncode == 0, f"cannot mount a tmpfs here: {result.stderr.strip()}"
    try:
        yield mount_point
    finally:
        if run(["umount", str(mount_point)]).returncode != 0:
            run(["umount", "-l", str(mount_point)])


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """Make ``folder`` (already populated) read-only for the server. As root, permissions do not
    bite: the folder is a tmpfs remounted read-only. Otherwise, chmod 0500."""
    if not is_root():
        folder.chmod(0o500)
        try:
            yield "chmod 0500"
        finally:
            folder.chmod(0o700)
        return
    staged = folder.with_name(folder.name + "-staged")
    if folder.exists():
        folder.rename(staged)
    with tmpfs(folder, "size=8m,mode=0700"):
        if staged.exists():
            for item in staged.iterdir():
                shutil.copy2(item, folder / item.name)
        remount = run(["mount", "-o", "remount,ro", str(folder)])
        assert remount.returncode == 0, remount.stderr
        yield "read-only tmpfs"


@pytest.mark.sqlite_only  # the SQLite file's folder (PostgreSQL keeps no data there)
@pytest.mark.parametrize("holds_database", [False, True], ids=["empty", "with-database"])
def test_an_unwritable_folder_answers_1002_and_changes_nothing(
    tmp_path: Path, holds_database: bool
) -> None:
    folder = tmp_path / "store"
    if holds_database:
        _make_database(folder)
    else:
        folder.mkdir(mode=0o700)
    with read_only(folder):
        before = database_bytes(folder)
        server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
        try:
            reason = storage_error(
                server, "chatHistory/append", {"conversationId": "c1", "messages": [user("x")]}
            )
            assert any(
                clue in reason
                for clue in ("is not writable", "Read-only file system", "Permission denied")
            ), reason
            assert server.alive()
            answer = server.request("chatHistory/get", {"conversationId": "c1"})
            # Reading may work or not; it never fails any other way.
            assert "result" in answer or answer["error"]["code"] == 1002, answer
            assert server.alive()
        finally:
            server.close()
        assert database_bytes(folder) == before


@pytest.mark.sqlite_only  # where the SQLite file would go
def test_a_storage_path_below_a_regular_file_answers_1002(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    server = start(blocker / "store", KEEP_ALL, log=tmp_path / "server.log")
    try:
        reason = storage_error(
            server, "chatHistory/append", {"conversationId": "c", "messages": [user("x")]}
        )
        assert "Not a directory" in reason
        assert server.alive()
    finally:
        server.close()
    assert blocker.read_text() == "a file where a folder should be"


def _fill_until_full(server: Server) -> tuple[list[int], str]:
    """Append 64 KB rows until storage answers 1002: (the rows answered, the reason)."""
    answered: list[int] = []
    for n in range(200):
        answer = server.request(
            "chatHistory/append",
            {"conversationId": "c", "messages": [user(f"row {n} " + "y" * 65_536)]},
        )
        if "error" in answer:
            assert answer["error"]["code"] == 1002, answer
            return answered, answer["error"]["data"]["reason"]
        answered.append(n)
    raise AssertionError("the storage never filled up")


def _rows(server: Server) -> list[int]:
    return [int(r["content"].split()[1]) for r in server.get("c")]


def _integrity(folder: Path) -> str:
    connection = sqlite3.connect(database_path(folder))
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


@pytest.mark.sqlite_only  # a full disk under the SQLite file
def test_a_full_disk_answers_1002_loses_nothing_and_recovers(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "size=1m,mode=0700") as disk:
        filler = disk / "filler"
        filler.write_bytes(bytes(300_000))
        folder = disk / "store"
        server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
        try:
            answered, reason = _fill_until_full(server)
            assert answered and "full" in reason, reason
            assert server.alive()
            assert _rows(server) == answered  # every answered append is there, nothing torn
            filler.unlink()  # space again: the same server carries on
            server.append("c", user("row 999 after the disk was freed"))
            assert _rows(server) == [*answered, 999]
        finally:
            server.close()
        assert _integrity(folder) == "ok"


@pytest.mark.sqlite_only  # RLIMIT_FSIZE on the SQLite file
def test_a_file_size_limit_answers_1002_and_loses_nothing(tmp_path: Path) -> None:
    """The full-disk case for any user: RLIMIT_FSIZE makes writes past 1 MB fail (EFBIG)."""
    folder = tmp_path / "store"
    limit = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log", preexec=limit)
    try:
        answered, reason = _fill_until_full(server)
        assert answered, reason
        assert server.alive()
    finally:
        server.close()
    assert _integrity(folder) == "ok"
    server = start(folder, KEEP_ALL, log=tmp_path / "second.log")
    try:
        assert _rows(server) == answered
    finally:
        server.close()


# -- schema versions --------------------------------------------------------------------------


@pytest.mark.sqlite_only  # a version 1 SQLite file (PostgreSQL starts at its own schema)
def test_a_first_version_database_is_migrated_with_every_row(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    file = database_path(folder)
    connection = sqlite3.connect(file)
    connection.executescript(MIGRATIONS[0])
    expected: dict[str, list[tuple[str, str, int]]] = {}
    for conversation in ("alpha", "beta"):
        rows = []
        for turn in (1, 2, 3):
            for role, text in (("user", f"{conversation} q{turn}"), ("assistant", f"a{turn}")):
                connection.execute(
                    "INSERT INTO messages (workspace, conversation, turn, role, content, "
                    "timestamp, tokens) VALUES ('ws', ?, ?, ?, ?, ?, ?)",
                    (conversation, turn, role, text, 1_764_480_000_000 + turn, 9),
                )
                rows.append((role, text, turn))
        first_of_last_turn = connection.execute(
            "SELECT MIN(id) FROM messages WHERE conversation = ? AND turn = 3", (conversation,)
        ).fetchone()[0]
        connection.execute(
            "INSERT INTO conversations VALUES ('ws', ?, 6, 54, 3, ?, ?, ?)",
            (conversation, first_of_last_turn, 1_764_480_000_001, 1_764_480_000_003),
        )
        expected[conversation] = rows
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()
    file.chmod(0o600)

    server = start(folder, KEEP_ALL)
    try:
        for conversation, rows in expected.items():
            got = server.get(conversation)
            assert [(r["role"], r["content"], r["turn"]) for r in got] == rows
            prepared = server.ok(
                "chatHistory/prepare", {"conversationId": conversation, "provider": "openai"}
            )
            assert len(prepared["body"]["messages"]) == len(rows)
        listed = server.ok("chatHistory/listConversations", {})["conversations"]
        assert sorted((c["conversationId"], c["messageCount"]) for c in listed) == [
            ("alpha", 6),
            ("beta", 6),
        ]
        stored = server.append("alpha", user("after the migration"))["messages"][0]
        assert stored["turn"] == 4
    finally:
        server.close()
    connection = sqlite3.connect(file)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 13
    finally:
        connection.close()


@pytest.mark.sqlite_only  # the SQLite file's user_version
def test_a_newer_schema_is_refused_with_a_clear_1002_and_left_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    file = database_path(folder)
    connection = sqlite3.connect(file)
    connection.execute("CREATE TABLE future (x TEXT)")
    connection.execute("INSERT INTO future VALUES ('from a newer server')")
    connection.execute("PRAGMA user_version = 99")
    connection.commit()
    connection.close()
    before = file.read_bytes()
    server = start(folder, KEEP_ALL)
    try:
        for method, params in (
            ("chatHistory/get", {"conversationId": "c"}),
            ("chatHistory/append", {"conversationId": "c", "messages": [user("x")]}),
        ):
            reason = storage_error(server, method, params)
            assert "99" in reason and "newer" in reason, reason
            assert server.alive()
    finally:
        server.close()
    assert file.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [file.name]


# -- permissions ------------------------------------------------------------------------------


@pytest.mark.sqlite_only  # SQLite file modes
def test_folder_and_every_database_file_are_owner_only_under_a_permissive_umask(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "new" / "nested" / "store"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log", umask=0)
    try:
        server.append("c", user("hello"))
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
        for made in (folder, folder.parent, folder.parent.parent):  # each folder it created
            assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
        base = database_path(folder).name
        assert files == {base: 0o600, f"{base}-wal": 0o600, f"{base}-shm": 0o600}
    finally:
        server.close()
    assert stat.S_IMODE(database_path(folder).stat().st_mode) == 0o600


def test_a_request_cannot_reach_storage_before_initialize_chooses_it(tmp_path: Path) -> None:
    """No request but initialize names the folder; before it, nothing touches the disk."""
    server = Server(tmp_path / "store", tmp_path / "server.log", cwd=tmp_path)
    try:
        answer = server.request(
            "chatHistory/append", {"conversationId": "../x", "messages": [user("x")]}
        )
        assert answer["error"]["code"] == -32002
        assert sorted(os.listdir(tmp_path)) == ["server.log"]
    finally:
        server.close()


# -- the file at the path -----------------------------------------------------------------------


def _contents(server: Server, conversation: str = "c") -> list[str]:
    return [r["content"] for r in server.get(conversation)]


def _rows_in(file: Path) -> list[str]:
    connection = sqlite3.connect(file)
    try:
        return [r[0] for r in connection.execute("SELECT content FROM messages ORDER BY id")]
    finally:
        connection.close()


@pytest.mark.sqlite_only  # the SQLite file deleted
@pytest.mark.parametrize("deleted", ["the database file", "the file, -wal and -shm"])
def test_a_database_deleted_while_in_use_is_replaced_by_a_new_one_that_keeps_every_later_row(
    tmp_path: Path, deleted: str
) -> None:
    """Rows answered after the deletion are in the file at the path, where a restart (or another
    window) finds them, not in the unlinked file."""
    folder = tmp_path / "store"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
    try:
        server.append("c", user("before"), assistant("old answer"))
        suffixes = [""] if deleted == "the database file" else list(SUFFIXES)
        for suffix in suffixes:
            Path(f"{database_path(folder)}{suffix}").unlink()
        server.append("c", user("after"), assistant("new answer"))
        assert _contents(server) == ["after", "new answer"]
        assert "was deleted, moved or replaced" in server.stderr_text()
    finally:
        server.close()
    assert _integrity(folder) == "ok"
    again = start(folder, KEEP_ALL, log=tmp_path / "again.log")
    try:
        assert _contents(again) == ["after", "new answer"]
    finally:
        again.close()


@pytest.mark.sqlite_only  # the SQLite file moved
@pytest.mark.parametrize("moved", ["the folder", "the file"])
def test_a_database_moved_while_in_use_keeps_its_rows_and_the_path_gets_the_new_ones(
    tmp_path: Path, moved: str
) -> None:
    """Where it went, the database is complete on its own (no -wal needed); the path, where a
    restart looks, gets a new database with the rows answered since."""
    folder = tmp_path / "store"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
    try:
        server.append("c", user("before"))
        if moved == "the folder":
            folder.rename(tmp_path / "moved")
            away = database_path(tmp_path / "moved")
        else:
            away = folder / "renamed.sqlite3"
            database_path(folder).rename(away)
        server.append("c", user("after"))
        assert _contents(server) == ["after"]
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        server.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{away}{suffix}").unlink(missing_ok=True)
    assert _rows_in(away) == ["before"]  # nothing lost where it went
    assert _rows_in(database_path(folder)) == ["after"]


@pytest.mark.sqlite_only  # the SQLite file replaced
def test_a_database_moved_over_the_open_one_is_used_from_the_next_request(tmp_path: Path) -> None:
    """Restoring a backup with ``mv`` while the server runs: the next request sees it."""
    folder, backup = tmp_path / "store", tmp_path / "backup"
    first = start(backup, KEEP_ALL, log=tmp_path / "backup.log")
    try:
        first.append("c", user("from the backup"))
    finally:
        first.close()
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
    try:
        server.append("c", user("current"))
        os.replace(database_path(backup), database_path(folder))
        assert _contents(server) == ["from the backup"]
        server.append("c", user("after the restore"))
    finally:
        server.close()
    assert _rows_in(database_path(folder)) == ["from the backup", "after the restore"]


# -- WAL resets that cannot finish at once -------------------------------------------------------


def _wal_bytes(folder: Path) -> int:
    wal = Path(f"{database_path(folder)}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _fill(disk: Path) -> Path:
    """A file that takes every free byte of ``disk``."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9):
            with contextlib.suppress(OSError):
                while True:
                    os.write(descriptor, bytes(size))
    finally:
        os.close(descriptor)
    return filler


@pytest.mark.sqlite_only  # SQLite's WAL on a full disk
def test_a_full_disk_after_the_commit_answers_the_change_and_resets_the_wal_later(
    tmp_path: Path,
) -> None:
    """An append whose retention deletes rows commits into the WAL (which has room); the reset
    that follows must grow the database file and cannot. The append was made, so it is answered
    with its result, and the reset is done once there is room again."""
    with tmpfs(tmp_path / "disk", "size=4m,mode=0700") as disk:
        folder = disk / "store"
        settings = {**KEEP_ALL, "maxMessages": 2}
        server = start(folder, settings, log=tmp_path / "server.log")
        try:
            secret, needle = _secret("short")
            server.append("c", user(secret), assistant("noted"))
            server.append("big", user("b" * 1_500_000))  # a WAL of 1.5 MB
            # Another connection copies the WAL into the database file (which grows to hold
            # it), leaving the WAL file at its size for the next commit to write over.
            reader = sqlite3.connect(database_path(folder))
            assert reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
            reader.close()
            filler = _fill(disk)
            # New pages past the file's end, written into the WAL; retention deletes the secret.
            answer = server.append("c", user("y" * 200_000), assistant("ok"))
            assert answer["pruned"]["reasons"] == ["count"]
            assert "did not finish" in server.stderr_text()
            assert _wal_bytes(folder) > 0  # the reset is pending, not forgotten
            filler.unlink()
            assert [r["content"][:1] for r in server.get("c")] == ["y", "o"]
            assert _wal_bytes(folder) == 0
            assert occurrences(folder, needle) == 0
            assert "pending WAL reset" in server.stderr_text()
        finally:
            server.close()
        assert _integrity(folder) == "ok"


@pytest.mark.sqlite_only  # SQLite's WAL bytes
@pytest.mark.parametrize("retried", ["by the next request", "while idle"])
def test_deleted_text_held_in_the_wal_by_a_reader_is_gone_once_the_reader_leaves(
    tmp_path: Path, retried: str
) -> None:
    folder = tmp_path / "store"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
    reader = None
    try:
        secret, needle = _secret("20 KB")
        server.append("c", user(secret), assistant("noted"))
        reader = sqlite3.connect(database_path(folder), isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
        assert server.ok("chatHistory/clear", {"conversationId": "c"}) == {"deletedMessages": 2}
        assert occurrences(folder, needle) > 0  # the reader's snapshot keeps the WAL
        reader.execute("COMMIT")  # the reader leaves, its connection stays open
        if retried == "by the next request":
            assert server.get("other") == []
        else:  # no request comes: the retry timer does it (a generous wait, not a timing claim)
            give_up = time.monotonic() + 60
            while occurrences(folder, needle) and time.monotonic() < give_up:
                time.sleep(0.1)
        assert occurrences(folder, needle) == 0
    finally:
        server.close()
        if reader is not None:
            assert occurrences(folder, needle) == 0
            reader.close()
    assert occurrences(folder, needle) == 0


@pytest.mark.sqlite_only  # SQLite's file bytes
def test_a_replaced_summary_leaves_no_byte_in_the_database_files(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log")
    try:
        for size in ("short", "20 KB"):
            secret, needle = _secret(size)
            server.ok("chatHistory/saveSummary", {"conversationId": size, "summary": secret})
            assert occurrences(folder, needle) > 0
            server.ok("chatHistory/saveSummary", {"conversationId": size, "summary": "newer"})
            assert occurrences(folder, needle) == 0
            summary = server.ok("chatHistory/getSummary", {"conversationId": size})
            assert summary["summary"] == "newer"
    finally:
        server.close()


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.iterdir()]}


@pytest.mark.sqlite_only  # SQLite file modes
def test_a_loose_store_of_ours_is_made_owner_only_and_a_shared_folder_is_warned_about(
    tmp_path: Path,
) -> None:
    ours, shared = tmp_path / "ours", tmp_path / "shared"
    for folder in (ours, shared):
        first = start(folder, KEEP_ALL, log=tmp_path / f"{folder.name}-first.log")
        try:
            first.append("c", user("hello"))
        finally:
            first.close()
        folder.chmod(0o777)
        database_path(folder).chmod(0o644)
    (shared / "notes.txt").write_text("the user keeps other things here")
    base = database_path(ours).name
    for folder in (ours, shared):
        server = start(folder, KEEP_ALL, log=tmp_path / f"{folder.name}.log", umask=0)
        try:
            server.append("c", user("again"))
            log = server.stderr_text()
        finally:
            server.close()
        assert "made owner-only (0600)" in log
        if folder is ours:
            assert "0777; made owner-only (0700)" in log
            assert _modes(folder) == {"ours": 0o700, base: 0o600}
        else:  # not only ours: left as it is, and said
            assert "other users can replace or delete the database" in log
            assert _modes(folder) == {"shared": 0o777, base: 0o600, "notes.txt": 0o644}


@pytest.mark.sqlite_only  # the SQLite file as a symlink
def test_a_dangling_symlink_as_the_database_gets_an_owner_only_target(tmp_path: Path) -> None:
    folder, target = tmp_path / "store", tmp_path / "elsewhere" / "history.sqlite3"
    folder.mkdir(mode=0o700)
    target.parent.mkdir()
    database_path(folder).symlink_to(target)
    server = start(folder, KEEP_ALL, log=tmp_path / "server.log", umask=0)
    try:
        server.append("c", user("through the link"))
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    finally:
        server.close()
    assert database_path(folder).is_symlink()
    assert _rows_in(target) == ["through the link"]


#: The server as the unprivileged user: everything it imports is loaded before it drops root
#: (the interpreter's own files are root's only on this machine), what it loads later too (the
#: methods with the first request, pygls in the background).
AS_NOBODY = (
    "import decimal, chat_history.__main__, chat_history.wire.server, chat_history.store, "
    "chat_history.wire.methods, chat_history.wire.lsp; "
    "os.setgroups([]); os.setgid(65534); os.setuid(65534)"
)


@pytest.mark.sqlite_only  # the SQLite file's owner
def test_a_store_that_belongs_to_another_user_is_refused_and_left_untouched() -> None:
    assert is_root(), "this test runs as root (CI does) to act as two users"
    shared = Path(tempfile.mkdtemp(prefix="chat-history-owner-"))
    try:
        folder = shared / "store"
        first = start(folder, KEEP_ALL, log=shared / "root.log")
        try:
            first.append("c", user("root's row"))
        finally:
            first.close()
        shared.chmod(0o755)
        folder.chmod(0o777)  # even writable by everyone, it is not the other user's to use
        database_path(folder).chmod(0o666)
        before = database_bytes(folder)
        server = start(folder, KEEP_ALL, log=shared / "nobody.log", preexec=AS_NOBODY)
        try:
            reason = storage_error(
                server, "chatHistory/append", {"conversationId": "c", "messages": [user("x")]}
            )
            assert "belongs to another user (uid 0)" in reason, reason
            assert server.alive()
        finally:
            server.close()
        assert database_bytes(folder) == before
        assert sorted(p.name for p in folder.iterdir()) == [database_path(folder).name]

        # Root may use another user's store (an administrator's CLI): warned, and it works.
        for path in (folder, database_path(folder)):
            os.chown(path, 65534, 65534)
        server = start(folder, KEEP_ALL, log=shared / "root-again.log")
        try:
            assert _contents(server) == ["root's row"]
            assert "belongs to uid 65534; used as root" in server.stderr_text()
        finally:
            server.close()
    finally:
        shutil.rmtree(shared)


@pytest.mark.sqlite_only  # the SQLite file's owner and modes
def test_a_root_server_makes_another_users_readable_store_owner_only() -> None:
    assert is_root(), "this test runs as root (CI does) to act as two users"
    shared = Path(tempfile.mkdtemp(prefix="chat-history-root-"))
    try:
        folder = shared / "store"
        first = start(folder, KEEP_ALL, log=shared / "first.log")
        try:
            first.append("c", user("the other user's row"))
        finally:
            first.close()
        base = database_path(folder)
        sidecars = [Path(f"{base}{suffix}") for suffix in ("-wal", "-shm")]
        for sidecar in sidecars:
            sidecar.touch()  # left by the other user's server (empty: nothing to replay)
        for path in (folder, base, *sidecars):
            os.chown(path, 65534, 65534)
            path.chmod(0o777 if path == folder else 0o666)  # readable by everyone
        server = start(folder, KEEP_ALL, log=shared / "root.log")
        try:
            assert _contents(server) == ["the other user's row"]
            server.append("c", user("root's row"))
            log = server.stderr_text()
        finally:
            server.close()
        assert "belongs to uid 65534; used as root" in log
        assert "made owner-only" in log
        modes = _modes(folder)
        assert modes.pop("store") == 0o700
        assert modes == dict.fromkeys(modes, 0o600) and base.name in modes, modes
        # still the other user's: tightened, not taken
        assert {p.stat().st_uid for p in [folder, *folder.iterdir()]} == {65534}
    finally:
        shutil.rmtree(shared)
