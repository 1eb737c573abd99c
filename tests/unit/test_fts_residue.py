"""Storage spike for issue 14's search index: which FTS5 design leaves no residue of deleted or
replaced text in the database files (db, -wal, -shm), on real files.

The design under test (the one the store should adopt): ``messages`` gains a ``folded`` column
(policy.search.folding.stored_fold: NULL for ASCII rows); a contentless FTS5 trigram index holds
``coalesce(folded, lower(content))`` and is kept by triggers; FTS5's ``secure-delete`` option,
``PRAGMA secure_delete=ON`` and a ``wal_checkpoint(TRUNCATE)`` after the deleting transaction.
``secure-delete`` needs SQLite 3.42, so the design runs on sqlean.py's bundled SQLite; the tests
also pin down why the machine's SQLite 3.40.1 cannot do the same without rewriting the whole
index on every deletion.

A residue check looks for the secret itself and, stricter, for every 3-character run of it that
was on disk after the insert and is nowhere else in the database (the trigram index stores
those runs; from them much of the secret can be pieced together).
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlean
import sqlite_utils

from chat_history.policy.search.folding import fold, stored_fold
from chat_history.policy.search.fts import fts_plan
from chat_history.policy.search.query import parse_query
from chat_history.policy.search.scoring import matches

#: Filler words use none of the secret's characters, so no run of the secret arises from them.
FILLER = ["alpha", "delta", "hotel", "lima", "papa", "echo", "radio", "tango", "sierra", "romeo"]
SECRET_ALPHABET = "qxzjkvwy0123456789"

MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    content TEXT NOT NULL,
    folded TEXT
)"""

#: The chosen index: contentless, folded text, maintained by triggers in built-in SQL only;
#: ``detail=none`` (smaller, looked up by covering trigrams: policy.search.fts.fts_plan), and
#: ``detail=full`` passes the same tests.
CHOSEN_INDEX = [
    "CREATE VIRTUAL TABLE search USING fts5(body, content='', detail=none, "
    "tokenize='trigram case_sensitive 1')",
    "INSERT INTO search(search, rank) VALUES ('secure-delete', 1)",
    """CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO search(rowid, body) VALUES (new.id, coalesce(new.folded, lower(new.content)));
    END""",
    """CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
        INSERT INTO search(search, rowid, body)
        VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
    END""",
    """CREATE TRIGGER messages_search_update AFTER UPDATE OF content, folded ON messages BEGIN
        INSERT INTO search(search, rowid, body)
        VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
        INSERT INTO search(rowid, body) VALUES (new.id, coalesce(new.folded, lower(new.content)));
    END""",
]


def external_index(*options: str) -> list[str]:
    """An external-content trigram index over the raw content, as sqlite-utils' enable_fts(...,
    create_triggers=True) builds it, plus the given FTS5 option statements."""
    return [
        "CREATE VIRTUAL TABLE search USING fts5(content, content='messages', "
        "content_rowid='id', tokenize='trigram')",
        *options,
        """CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
            INSERT INTO search(rowid, content) VALUES (new.id, new.content);
        END""",
        """CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
            INSERT INTO search(search, rowid, content) VALUES ('delete', old.id, old.content);
        END""",
        """CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO search(search, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO search(rowid, content) VALUES (new.id, new.content);
        END""",
    ]


class Db:
    """One database file opened with ``driver`` in WAL mode, one transaction per write."""

    def __init__(
        self, driver: ModuleType, path: Path, index: list[str], *, secure_pragma: bool = True
    ) -> None:
        self.path = path
        self.connection: Any = driver.connect(str(path), isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")  # as the store; no fsync per commit
        self.connection.execute(f"PRAGMA secure_delete={'ON' if secure_pragma else 'OFF'}")
        self.connection.execute(MESSAGES)
        for statement in index:
            self.connection.execute(statement)
        self.positions = "detail=none" not in index[0]
        self.rng = random.Random(14)

    def write(self, sql: str, *params: Any, optimize: bool = False) -> Any:
        self.connection.execute("BEGIN IMMEDIATE")
        cursor = self.connection.execute(sql, params)
        if optimize:
            self.connection.execute("INSERT INTO search(search) VALUES ('optimize')")
        self.connection.execute("COMMIT")
        return cursor

    def append(self, content: str, conversation: str = "c") -> int:
        cursor = self.write(
            "INSERT INTO messages(conversation, content, folded) VALUES (?, ?, ?)",
            conversation,
            content,
            stored_fold(content),
        )
        return int(cursor.lastrowid)

    def filler(self, count: int, conversation: str = "c") -> None:
        for _ in range(count):
            self.append(" ".join(self.rng.choice(FILLER) for _ in range(12)), conversation)

    def secret(self) -> str:
        return "zqxj" + "".join(self.rng.choice(SECRET_ALPHABET) for _ in range(20))

    def checkpoint(self) -> None:
        busy, _, _ = self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0

    def disk(self) -> bytes:
        return b"".join(
            file.read_bytes()
            for file in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if file.exists()
        )

    def found(self, text: str) -> list[int]:
        query = parse_query(text)
        expression = fts_plan(query, positions=self.positions).expression
        sql = (
            "SELECT m.id, m.content FROM search JOIN messages m ON m.id = search.rowid "
            "WHERE search MATCH ? ORDER BY m.id"
        )
        rows = self.connection.execute(sql, (expression,))
        return [row_id for row_id, content in rows if matches(content, query)]

    def indexed(self, text: str) -> list[int]:
        """Rowids the index itself holds for ``text`` (a deleted row's included)."""
        expression = fts_plan(parse_query(text), positions=self.positions).expression
        sql = "SELECT rowid FROM search WHERE search MATCH ?"
        return [rowid for (rowid,) in self.connection.execute(sql, (expression,))]


def runs(text: str) -> set[bytes]:
    return {text[i : i + 3].encode() for i in range(len(text) - 2)}


class Residue:
    """The secret (in every case form the row holds) and its runs that reached the disk, to look
    for after an operation."""

    def __init__(self, db: Db, secret: str, row_text: str, baseline: bytes) -> None:
        db.checkpoint()
        on_disk = db.disk()
        self.db = db
        self.secret = secret
        self.needles = [form.encode() for form in {secret, secret.upper()} if form in row_text]
        assert self.needles
        for needle in self.needles:
            assert needle in on_disk, "the secret must first be proven on disk"
        self.runs = {
            run
            for form in (secret, secret.upper())
            for run in runs(form)
            if run in on_disk and run not in baseline
        }
        assert len(self.runs) >= 10

    def left(self) -> tuple[int, set[bytes]]:
        """After the operation: how often the secret is on disk, and which runs are."""
        self.db.checkpoint()
        on_disk = self.db.disk()
        count = sum(on_disk.count(needle) for needle in self.needles)
        return count, {run for run in self.runs if run in on_disk}


#: One operation that removes the secret's row (or its old text), as the store's would.
Operation = Callable[[Db, int, str], None]


def delete_row(db: Db, row_id: int, secret: str) -> None:
    db.write("DELETE FROM messages WHERE id = ?", row_id)


def truncate_from(db: Db, row_id: int, secret: str) -> None:
    db.write("DELETE FROM messages WHERE conversation = 'c' AND id >= ?", row_id)


def edit_row(db: Db, row_id: int, secret: str) -> None:
    content = "[redacted] — ok"
    db.write(
        "UPDATE messages SET content = ?, folded = ? WHERE id = ?",
        content,
        stored_fold(content),
        row_id,
    )


def clear_conversation(db: Db, row_id: int, secret: str) -> None:
    db.write("DELETE FROM messages WHERE conversation = 'c'")


OPERATIONS = [delete_row, truncate_from, edit_row, clear_conversation]


#: The rows of a second conversation, which every operation on ``c`` must leave found.
KEPT = "the other chat keeps this"


def plant(db: Db, text: Callable[[str], str], before: int, after: int) -> tuple[Residue, int]:
    """Filler rows, a row holding a fresh secret, more filler (which merges the secret's index
    segment into older ones), with a second conversation that must survive."""
    db.filler(before)
    for _ in range(5):
        db.append(KEPT, "other")
    db.checkpoint()
    baseline = db.disk()
    secret = db.secret()
    row_text = text(secret)
    row_id = db.append(row_text)
    db.filler(after)
    return Residue(db, secret, row_text, baseline), row_id


def with_detail(detail: str) -> list[str]:
    return [CHOSEN_INDEX[0].replace("detail=none", f"detail={detail}"), *CHOSEN_INDEX[1:]]


@pytest.fixture(params=["none", "full"], ids=["detail-none", "detail-full"])
def chosen(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Db]:
    db = Db(sqlean, tmp_path / "chosen.sqlite3", with_detail(request.param))
    (schema,) = db.connection.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'search'"
    ).fetchone()
    assert f"detail={request.param}" in schema
    yield db
    db.connection.close()


def test_the_bundled_sqlite_is_new_enough_and_the_machine_s_is_not() -> None:
    assert sqlean.sqlite_version_info >= (3, 42, 0)
    memory = sqlite3.connect(":memory:")
    memory.execute("CREATE VIRTUAL TABLE search USING fts5(body, content='', tokenize='trigram')")
    if sqlite3.sqlite_version_info < (3, 42, 0):
        with pytest.raises(sqlite3.OperationalError):
            memory.execute("INSERT INTO search(search, rank) VALUES ('secure-delete', 1)")


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.__name__)
@pytest.mark.parametrize("merged", [False, True], ids=["fresh-segment", "merged-segment"])
@pytest.mark.parametrize(
    "text",
    [lambda s: f"my key is {s} ok", lambda s: f"Clé: {s.upper()} ÉTÉ"],
    ids=["ascii", "accented"],
)
def test_the_chosen_design_leaves_no_residue(
    chosen: Db, operation: Operation, merged: bool, text: Callable[[str], str]
) -> None:
    residue, row_id = plant(chosen, text, before=30, after=200 if merged else 1)
    assert chosen.found(residue.secret) == [row_id]
    operation(chosen, row_id, residue.secret)
    assert chosen.indexed(residue.secret) == []
    assert residue.left() == (0, set())
    others = chosen.connection.execute("SELECT id FROM messages WHERE conversation = 'other'")
    kept = [row_id for (row_id,) in others]
    assert len(kept) == 5
    assert chosen.found(f'"{KEPT}"') == kept


def test_the_chosen_index_finds_what_the_matcher_finds(chosen: Db) -> None:
    rows = {
        chosen.append("Le CAFÉ de Paris"): "café",
        chosen.append("die Straße"): "strasse",
        chosen.append("東京都に住む"): "東京都",
        chosen.append("before\x00after"): "after",
        chosen.append("call read_file"): "read",
    }
    for row_id, query in rows.items():
        assert row_id in chosen.found(query)
        assert len(chosen.found(fold(query))) == len(chosen.found(query))


def test_without_the_secure_delete_pragma_the_deleted_text_stays_in_the_file(
    tmp_path: Path,
) -> None:
    db = Db(sqlean, tmp_path / "no-pragma.sqlite3", CHOSEN_INDEX, secure_pragma=False)
    residue, row_id = plant(db, lambda s: f"key {s}", before=30, after=1)
    delete_row(db, row_id, residue.secret)
    count, _ = residue.left()
    assert count > 0


@pytest.mark.parametrize("driver", [sqlite3, sqlean], ids=["machine-3.40", "sqlean"])
def test_without_fts_secure_delete_the_index_keeps_the_deleted_runs(
    tmp_path: Path, driver: ModuleType
) -> None:
    db = Db(driver, tmp_path / "plain.sqlite3", external_index())
    residue, row_id = plant(db, lambda s: f"key {s}", before=30, after=200)
    delete_row(db, row_id, residue.secret)
    assert db.found(residue.secret) == []
    count, left = residue.left()
    assert count == 0  # the row itself is wiped by the pragma...
    assert left  # ...but the index's old segment still holds runs of the secret


def test_on_the_machine_s_sqlite_only_an_optimize_per_deletion_clears_the_index(
    tmp_path: Path,
) -> None:
    db = Db(sqlite3, tmp_path / "optimize.sqlite3", external_index())
    residue, row_id = plant(db, lambda s: f"key {s}", before=30, after=200)
    db.write("DELETE FROM messages WHERE id = ?", row_id, optimize=True)
    assert residue.left() == (0, set())


def test_an_external_content_index_with_secure_delete_also_passes(tmp_path: Path) -> None:
    secure = "INSERT INTO search(search, rank) VALUES ('secure-delete', 1)"
    db = Db(sqlean, tmp_path / "external.sqlite3", external_index(secure))
    residue, row_id = plant(db, lambda s: f"key {s}", before=30, after=200)
    edit_row(db, row_id, residue.secret)
    assert residue.left() == (0, set())


def test_contentless_delete_tables_keep_the_runs_even_with_secure_delete(tmp_path: Path) -> None:
    index = [
        "CREATE VIRTUAL TABLE search USING fts5(body, content='', contentless_delete=1, "
        "tokenize='trigram case_sensitive 1')",
        "INSERT INTO search(search, rank) VALUES ('secure-delete', 1)",
        CHOSEN_INDEX[2],
        """CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
            DELETE FROM search WHERE rowid = old.id;
        END""",
    ]
    db = Db(sqlean, tmp_path / "contentless-delete.sqlite3", index)
    residue, row_id = plant(db, lambda s: f"key {s}", before=30, after=200)
    delete_row(db, row_id, residue.secret)
    assert db.found(residue.secret) == []
    _, left = residue.left()
    assert left


def test_sqlite_utils_wraps_a_sqlean_connection(tmp_path: Path) -> None:
    connection = sqlean.connect(str(tmp_path / "utils.sqlite3"))
    db = sqlite_utils.Database(connection)
    db["messages"].insert_all(  # type: ignore[union-attr]
        [{"id": 1, "content": "call read_file now"}, {"id": 2, "content": "other"}], pk="id"
    )
    db["messages"].enable_fts(["content"], tokenize="trigram", create_triggers=True)  # type: ignore[union-attr]
    assert db.execute("SELECT sqlite_version()").fetchone()[0] == sqlean.sqlite_version
    assert [row["id"] for row in db["messages"].search(db.quote_fts("read"))] == [1]  # type: ignore[union-attr]
    # quote_fts does not make every query data: a lone quote becomes an empty MATCH.
    with pytest.raises(sqlean.OperationalError):
        list(db["messages"].search(db.quote_fts('"')))  # type: ignore[union-attr]
    connection.close()


#: The lazy variant: appends do not touch the index (an append then costs what it costs without
#: one); a search first indexes every row after ``indexed_through`` in one transaction, and the
#: triggers delete from the index only rows it already holds.
LAZY_INDEX = [
    CHOSEN_INDEX[0],
    CHOSEN_INDEX[1],
    "CREATE TABLE search_state (id INTEGER PRIMARY KEY CHECK (id = 0), "
    "indexed_through INTEGER NOT NULL)",
    "INSERT INTO search_state VALUES (0, 0)",
    """CREATE TRIGGER messages_search_delete AFTER DELETE ON messages
    WHEN old.id <= (SELECT indexed_through FROM search_state) BEGIN
        INSERT INTO search(search, rowid, body)
        VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
    END""",
    """CREATE TRIGGER messages_search_update AFTER UPDATE OF content, folded ON messages
    WHEN old.id <= (SELECT indexed_through FROM search_state) BEGIN
        INSERT INTO search(search, rowid, body)
        VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
        INSERT INTO search(rowid, body) VALUES (new.id, coalesce(new.folded, lower(new.content)));
    END""",
]
CATCH_UP = [
    "INSERT INTO search(rowid, body) SELECT id, coalesce(folded, lower(content)) FROM messages "
    "WHERE id > (SELECT indexed_through FROM search_state) ORDER BY id",
    # AUTOINCREMENT never hands out an id twice, so everything up to the largest is indexed.
    "UPDATE search_state SET indexed_through = max(indexed_through, "
    "coalesce((SELECT max(id) FROM messages), 0))",
]


def catch_up(db: Db) -> None:
    db.connection.execute("BEGIN IMMEDIATE")
    for statement in CATCH_UP:
        db.connection.execute(statement)
    db.connection.execute("COMMIT")


@pytest.mark.parametrize("operation", [delete_row, edit_row], ids=lambda op: op.__name__)
@pytest.mark.parametrize("indexed_first", [False, True], ids=["unindexed", "indexed"])
def test_a_lazily_caught_up_index_leaves_no_residue_and_finds_every_row(
    tmp_path: Path, operation: Operation, indexed_first: bool
) -> None:
    db = Db(sqlean, tmp_path / "lazy.sqlite3", LAZY_INDEX)
    db.filler(20)
    catch_up(db)
    residue, row_id = plant(db, lambda s: f"Clé {s}", before=5, after=100)
    if indexed_first:
        catch_up(db)
        assert db.indexed(residue.secret) == [row_id]
    operation(db, row_id, residue.secret)
    catch_up(db)
    assert db.indexed(residue.secret) == []
    assert residue.left() == (0, set())
    kept = [
        row
        for (row,) in db.connection.execute("SELECT id FROM messages WHERE content = ?", (KEPT,))
    ]
    assert db.found(f'"{KEPT}"') == kept
    if operation is edit_row:
        assert db.found("redacted") == [row_id]
