"""Deleted means deleted, the search index included (protocol.md "Version 2"): a unique secret in
a row, found by a search (so the index holds it) and proven on disk (db, -wal, -shm), then
removed by ``clear``, by retention, or by another connection's plain SQL (an UPDATE of the
content, a DELETE): afterwards neither the secret nor any 3-character run of it that reached the
disk is left in the files, the index holds nothing for it, and no search finds it.

The runs matter because a trigram index stores them: from them much of a secret can be pieced
together. The secret is made of letters that the filler text never uses, so its runs arise
nowhere else."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.e2e.reliability import (
    KEEP_ALL,
    Server,
    assistant,
    database_bytes,
    database_path,
    start,
    user,
)

from chat_history.policy.search.folding import stored_fold
from chat_history.policy.search.fts import fts_plan
from chat_history.policy.search.query import parse_query
from chat_history.store.engine import sqlite3

FILLER = ["alpha", "delta", "hotel", "lima", "papa", "echo", "radio", "tango", "sierra", "romeo"]
SECRET_LETTERS = "qxzjkvwy"
OLD = 1_577_836_800_000  # 2020-01-01


def disk(folder: Path) -> bytes:
    return b"".join(database_bytes(folder).values())


def runs(text: str) -> set[bytes]:
    return {text[i : i + 3].encode() for i in range(len(text) - 2)}


def indexed(folder: Path, text: str) -> list[int]:
    """The rowids the index itself holds for ``text`` (read with another connection)."""
    expression = fts_plan(parse_query(text), positions=False).expression
    connection = sqlite3.connect(database_path(folder))
    try:
        sql = "SELECT rowid FROM search WHERE search MATCH ?"
        return [rowid for (rowid,) in connection.execute(sql, (expression,))]
    finally:
        connection.close()


def plain_sql(folder: Path, sql: str, *params: object) -> None:
    """A write by another connection that knows only the table (as another tool or operation
    would make it), with the store's pragmas, then its WAL reset."""
    connection = sqlite3.connect(database_path(folder), isolation_level=None)
    try:
        connection.execute("PRAGMA busy_timeout = 10000")
        connection.execute("PRAGMA secure_delete = ON")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(sql, params)
        connection.execute("COMMIT")
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        connection.close()


def search_ids(server: Server, query: str) -> list[int]:
    result = server.ok("chatHistory/search", {"query": query, "roles": ["user", "assistant"]})
    return [r["id"] for r in result["results"]]


def by_clear(server: Server, folder: Path, row_id: int) -> None:
    server.ok("chatHistory/clear", {"conversationId": "c"})


def by_clear_of_a_long_conversation(server: Server, folder: Path, row_id: int) -> None:
    """A clear of many indexed rows: the index is rewritten once instead of row by row."""
    server.ok("chatHistory/clear", {"conversationId": "c"})


def by_retention(server: Server, folder: Path, row_id: int) -> None:
    server.notify(
        "workspace/didChangeConfiguration",
        {"settings": {"chatHistory": {**KEEP_ALL, "maxAgeHours": 1}}},
    )
    assert server.ok("chatHistory/get", {"conversationId": "c"})["pruned"]["reasons"] == ["age"]


REPLACEMENT = "[redacted] — Ünïcode ok"


def by_sql_update(server: Server, folder: Path, row_id: int) -> None:
    plain_sql(
        folder,
        "UPDATE messages SET content = ?, folded = ? WHERE id = ?",
        REPLACEMENT,
        stored_fold(REPLACEMENT),
        row_id,
    )


def by_sql_delete(server: Server, folder: Path, row_id: int) -> None:
    plain_sql(folder, "DELETE FROM messages WHERE id = ?", row_id)


@pytest.mark.parametrize(
    "remove",
    [by_clear, by_clear_of_a_long_conversation, by_retention, by_sql_update, by_sql_delete],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize(
    "text",
    [lambda s: f"my key is {s} ok", lambda s: f"Clé: {s.upper()} ÉTÉ"],
    ids=["ascii", "accented"],
)
def test_a_removed_row_leaves_no_residue_in_the_files_or_the_index(
    tmp_path: Path,
    remove: Callable[[Server, Path, int], None],
    text: Callable[[str], str],
) -> None:
    folder = tmp_path / "store"
    rng = random.Random(14)
    server = start(folder, KEEP_ALL)
    try:
        for _ in range(40):  # filler, in the index before the secret
            server.append("other", user(" ".join(rng.choice(FILLER) for _ in range(12))))
        assert search_ids(server, "alpha")
        if remove is by_clear_of_a_long_conversation:
            server.append("c", *[user(f"row {i} of a long chat") for i in range(300)])
            assert search_ids(server, "long chat")
        baseline = disk(folder)

        secret = "zqxj" + "".join(rng.choice(SECRET_LETTERS) for _ in range(20))
        row_text = text(secret)
        row_id = server.append("c", user(row_text, timestamp=OLD), assistant("ok", timestamp=OLD))[
            "messages"
        ][0]["id"]
        server.append("c", user("the newest turn stays"))
        for _ in range(60):  # more index segments written after the secret's
            server.append("other", user(" ".join(rng.choice(FILLER) for _ in range(12))))
            search_ids(server, "hotel")
        assert search_ids(server, secret) == [row_id]
        assert indexed(folder, secret) == [row_id]
        on_disk = disk(folder)
        needles = [form.encode() for form in {secret, secret.upper()} if form in row_text]
        assert all(needle in on_disk for needle in needles)
        secret_runs = {
            run
            for form in (secret, secret.upper())
            for run in runs(form)
            if run in on_disk and run not in baseline
        }
        assert len(secret_runs) >= 15

        remove(server, folder, row_id)

        assert search_ids(server, secret) == []
        assert indexed(folder, secret) == []
        if remove not in (by_clear, by_clear_of_a_long_conversation):
            assert search_ids(server, '"the newest turn stays"') != []
        assert len(search_ids(server, "alpha")) > 0
        if remove is by_sql_update:
            assert search_ids(server, "unicode") == [row_id]
        left = disk(folder)
        assert sum(left.count(needle) for needle in needles) == 0
        assert {run for run in secret_runs if run in left} == set()
    finally:
        server.close()
    left = disk(folder)
    assert {run for run in secret_runs if run in left} == set()
