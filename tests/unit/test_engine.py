"""The store's SQLite engine (store/engine.py): the part of ``sqlite3``'s interface the store uses,
over APSW, on real database files — what each call answers, and the SQLite build it brings."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_history.store import failures
from chat_history.store.engine import sqlite3


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(tmp_path / "e.sqlite3", isolation_level=None, timeout=0.05)
    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    return connection


def test_the_sqlite_has_fts5_secure_delete(db: sqlite3.Connection) -> None:
    assert sqlite3.sqlite_version_info >= (3, 42, 0)
    db.execute("CREATE VIRTUAL TABLE s USING fts5(body)")
    db.execute("INSERT INTO s(s, rank) VALUES ('secure-delete', 1)")


def test_rowcount_and_lastrowid_as_the_stdlib_gives_them(db: sqlite3.Connection) -> None:
    inserted = db.execute("INSERT INTO t (body) VALUES (?)", ("a",))
    assert inserted.lastrowid == 1 and inserted.rowcount == 1
    db.executemany("INSERT INTO t (body) VALUES (?)", [("b",), ("c",), ("d",)])
    assert db.execute("  delete FROM t WHERE id > :id", {"id": 2}).rowcount == 2
    assert db.execute("UPDATE t SET body = 'x' WHERE id = 99").rowcount == 0
    assert db.execute("SELECT * FROM t").rowcount == -1


def test_rows_come_as_tuples_one_by_one_or_in_batches(db: sqlite3.Connection) -> None:
    db.executemany("INSERT INTO t (body) VALUES (?)", [(str(i),) for i in range(5)])
    cursor = db.execute("SELECT body FROM t ORDER BY id")
    assert cursor.fetchone() == ("0",)
    assert cursor.fetchmany(3) == [("1",), ("2",), ("3",)]
    assert cursor.fetchmany(3) == [("4",)]
    assert cursor.fetchmany(3) == []
    cursor.close()
    assert db.execute("SELECT body FROM t WHERE id = 99").fetchone() is None
    assert [row for (row,) in db.execute("SELECT id FROM t")] == [1, 2, 3, 4, 5]
    assert db.execute("SELECT count(*) FROM t").fetchall() == [(5,)]


def test_transactions_are_the_callers_own(db: sqlite3.Connection) -> None:
    assert not db.in_transaction
    db.execute("BEGIN IMMEDIATE")
    assert db.in_transaction
    db.execute("INSERT INTO t (body) VALUES ('a')")
    db.execute("ROLLBACK")
    assert not db.in_transaction
    assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_lock_held_elsewhere_is_told_apart(tmp_path: Path, db: sqlite3.Connection) -> None:
    other = sqlite3.connect(tmp_path / "e.sqlite3", isolation_level=None, timeout=0.05)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.Error) as caught:
        db.execute("BEGIN IMMEDIATE")
    assert sqlite3.is_locked(caught.value)
    assert failures.primary_code(caught.value) == 5
    assert "still locked after" in failures.reason(caught.value)
    other.execute("ROLLBACK")
    with pytest.raises(sqlite3.Error) as caught:
        db.execute("SELECT * FROM missing")
    assert not sqlite3.is_locked(caught.value) and "no such table" in str(caught.value)


def test_a_damaged_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"not a database" * 400)
    connection = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(sqlite3.Error) as caught:
        connection.execute("SELECT * FROM sqlite_master")
    assert failures.primary_code(caught.value) in failures.DAMAGED


def test_complete_statement() -> None:
    assert sqlite3.complete_statement("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END;")
    assert not sqlite3.complete_statement("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1;")
