"""Deleted means deleted at the commit (store.seam): a write transaction that deletes or
replaces text purges the old bytes when it commits, with nothing called by hand. Each test
writes through the store's own ``write()`` only (no manager, no ``purge_deleted`` call): on
SQLite the secret leaves the database, its -wal and -shm; on PostgreSQL the commit runs the
purge (``purge_seconds=0``: at once). A rolled-back write purges nothing, and a write that
removes nothing leaves the WAL alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from chat_history.model import Key, Message, Summary
from chat_history.policy.tree import Switch
from chat_history.store.postgres import PostgresStore
from chat_history.store.schema import DATABASE_FILE
from chat_history.store.seam import HistoryStore, write_retried
from chat_history.store.transaction import Transaction
from chat_history.store.tree_section import TreeReading, TreeWriting

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")
SECRET = "SECRET-7c0e2f61-commit-purge-b4d9a1"
NOW = 1_700_000_000_000


def seed(store: HistoryStore) -> None:
    """A conversation whose first turn, summary, title and metadata hold the secret."""

    def body(tx: Transaction) -> None:
        rows = [
            (Message(role="user", content=f"my token is {SECRET}"), 1, 5),
            (Message(role="assistant", content=f"noted {SECRET}"), 1, 5),
            (Message(role="user", content="kept"), 2, 1),
        ]
        tx.insert(KEY, rows, tx.totals(KEY), NOW)
        tx.save_summary(KEY, Summary(summary=f"about {SECRET}", updated_at=NOW))
        tx.set_title(KEY, f"title {SECRET}")
        tx.set_metadata(KEY, f'{{"note": "{SECRET}"}}')

    write_retried(store, (KEY,), body)


def occurrences(folder: Path) -> int:
    needle = SECRET.encode()
    total = 0
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{folder / DATABASE_FILE}{suffix}")
        if path.exists():
            total += path.read_bytes().count(needle)
    return total


def secret_rows(tx: Transaction) -> list:
    return [row for row in tx.all_rows(KEY) if SECRET in str(row.content)]


def remove_everything(tx: Transaction) -> None:
    """Every deleting or replacing method of Transaction, each once."""
    first, second = secret_rows(tx)
    tx.delete_messages(KEY, [first])
    tx.update_message(KEY, second, attrs.evolve(second, content="edited"))
    tx.save_summary(KEY, Summary(summary="new summary", updated_at=NOW + 1))
    tx.set_title(KEY, "new title")
    tx.set_metadata(KEY, None)


WRITES: dict[str, Callable[[Transaction], object]] = {
    "clear": lambda tx: tx.clear(KEY),
    "edits": remove_everything,
    "delete_rows_and_summary": lambda tx: (
        tx.delete_rows(KEY, [row.id for row in secret_rows(tx)]),
        tx.delete_summary(KEY),
        tx.set_title(KEY, None),
        tx.set_metadata(KEY, None),
    ),
}


def purges(store: HistoryStore) -> int:
    return store.purges if isinstance(store, PostgresStore) else 0


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_deleting_write_purges_at_its_commit(
    make_store, db_folder: Path, engine: str, name: str
) -> None:
    store = make_store(purge_seconds=0) if engine == "postgres" else make_store()
    seed(store)
    if engine == "sqlite":
        assert occurrences(db_folder) > 0, "the test could not fail"
    before = purges(store)

    with store.write((KEY,)) as tx:
        WRITES[name](tx)
        assert tx.removed_text

    if engine == "sqlite":
        assert occurrences(db_folder) == 0
        assert Path(f"{db_folder / DATABASE_FILE}-wal").stat().st_size == 0
    else:
        assert purges(store) == before + 1
    with store.read() as reading:
        assert not any(SECRET in str(row.content) for row in reading.all_rows(KEY))


def test_a_write_that_rolls_back_purges_nothing(make_store, db_folder: Path, engine: str) -> None:
    store = make_store(purge_seconds=0) if engine == "postgres" else make_store()
    seed(store)
    before = purges(store)

    with pytest.raises(ValueError), store.write((KEY,)) as tx:
        tx.clear(KEY)
        raise ValueError("the operation failed")

    assert purges(store) == before
    with store.read() as reading:
        assert len(secret_rows(reading)) == 2  # type: ignore[arg-type]
    if engine == "sqlite":
        assert occurrences(db_folder) > 0


def test_a_write_that_removes_nothing_leaves_the_wal(
    make_store, db_folder: Path, engine: str
) -> None:
    store = make_store(purge_seconds=0) if engine == "postgres" else make_store()
    before = purges(store)

    with store.write((KEY,)) as tx:
        tx.insert(KEY, [(Message(role="user", content="hello"), 1, 1)], None, NOW)
        assert not tx.removed_text

    assert purges(store) == before
    if engine == "sqlite":
        assert Path(f"{db_folder / DATABASE_FILE}-wal").stat().st_size > 0


def test_deleting_an_inactive_branch_purges_at_its_commit(
    make_store, db_folder: Path, engine: str
) -> None:
    """Version 5: the rows off the active path (a branch the secret's turn started) are deleted
    whole, and their bytes leave the files at that commit like any other deletion."""
    store = make_store(purge_seconds=0) if engine == "postgres" else make_store()
    seed(store)
    # The kept row becomes a first row of its own branch: the secret's turn is parked.
    write_retried(
        store,
        (KEY,),
        lambda tx: TreeWriting(tx).activate(KEY, Switch(None, ()), stamp=NOW, switched=True),
    )
    write_retried(
        store,
        (KEY,),
        lambda tx: tx.insert(
            KEY, [(Message(role="user", content="new"), 1, 1)], tx.totals(KEY), NOW
        ),
    )
    with store.read() as reading:
        heads = TreeReading(reading).branches(KEY)
        assert [b.rows for b in heads] == [3]  # the secret's path, off the active path
    if engine == "sqlite":
        assert occurrences(db_folder) > 0, "the test could not fail"
    before = purges(store)

    with store.write((KEY,)) as tx:
        assert TreeWriting(tx).delete_subtrees(KEY, [heads[0].head]) == 3
        assert tx.removed_text

    if engine == "sqlite":
        # The summary, title and metadata still hold it: the rows' own texts are gone.
        needle = f"my token is {SECRET}".encode()
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{db_folder / DATABASE_FILE}{suffix}")
            if path.exists():
                assert needle not in path.read_bytes(), suffix
                assert f"noted {SECRET}".encode() not in path.read_bytes(), suffix
        assert Path(f"{db_folder / DATABASE_FILE}-wal").stat().st_size == 0
    else:
        assert purges(store) == before + 1
    with store.read() as reading:
        assert [row.content for row in reading.all_rows(KEY)] == ["new"]
        assert TreeReading(reading).parked_nodes(KEY) == []
