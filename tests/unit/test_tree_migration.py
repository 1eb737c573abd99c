"""A database an earlier release wrote (SQLite schema 13, PostgreSQL schema 9), migrated through
origins (SQLite 14, PostgreSQL 10) to conversation trees (protocol.md "Version 5": SQLite 15,
PostgreSQL 11) and each row's children by index (SQLite 16, PostgreSQL 12): every conversation one
path (each row's parent the row before it in id order), its newest row the active leaf, and
every read of versions 1–4 byte for byte what that release answered (``get``'s fields,
``format``'s and ``prepare``'s bodies). The files are tests/fixtures/legacy's, written by that
release's own code (``make_previous.py`` says how)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster
from tests.unit.conftest import FixedClock

from chat_history.model import Follow, Key, Message
from chat_history.service import branches, history
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions
from chat_history.store import Store
from chat_history.store.engine import sqlite3
from chat_history.store.postgres import PostgresStore, schema
from chat_history.store.schema import DATABASE_FILE, SCHEMA_VERSION
from chat_history.wire.protocol import wire, wire_message

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
ANSWERS: dict[str, Any] = json.loads((LEGACY / "previous.json").read_text(encoding="utf-8"))
KINDS = ("openai", "anthropic", "gemini", "bedrock")
#: Just after the fixtures' rows were written (so the age rule deletes none of them).
AFTER = 1_764_480_100_000


def _key(name: str) -> Key:
    workspace, conversation = name.split(" ")
    return Key(workspace, conversation)


def answers_as_before(manager: ChatHistoryManager) -> None:
    """Every conversation reads as the previous release answered, plus each row's parent (the
    row before it) and siblings (none)."""
    for name, before in ANSWERS.items():
        key = _key(name)
        rows = history.get(manager, key).messages
        got = [wire_message(row) for row in rows]
        assert [{k: m[k] for k in old} for m, old in zip(got, before["get"], strict=True)] == (
            before["get"]
        ), name
        assert [m["parentId"] for m in got] == [None, *(m["id"] for m in got[:-1])], name
        assert all(m["siblings"] == {"index": 0, "count": 1, "ids": [m["id"]]} for m in got)
        bodies = {kind: history.format(manager, key, kind).body for kind in KINDS}
        assert json.dumps(wire(bodies), sort_keys=True) == json.dumps(
            before["format"], sort_keys=True
        ), name
        prepared = history.prepare(manager, key, PrepareOptions(provider="openai"))
        assert json.dumps(wire(prepared.body), sort_keys=True) == json.dumps(
            before["prepare"], sort_keys=True
        ), name
        tree = branches.tree(manager, key)
        assert tree.active_leaf_id == got[-1]["id"] and not tree.has_more
        assert [n.id for n in tree.nodes] == [m["id"] for m in got]
        assert all(n.active and n.children == (n.id != got[-1]["id"]) for n in tree.nodes)


def branches_work(manager: ChatHistoryManager) -> None:
    """A migrated conversation branches: an edit and resend of its second question keeps the
    old path, which a switch brings back as it was."""
    key = Key("file:///work/project", "chat-1")
    before = history.get(manager, key).messages
    second = next(row for row in before if row.content.startswith("Question 2"))
    appended = history.append(
        manager, key, [Message(role="user", content="Q2, again")], Follow(second.parent_id)
    )
    new = appended.messages[0]
    assert new.parent_id == second.parent_id
    assert new.siblings is not None and new.siblings.ids == (second.id, new.id)
    shown = history.get(manager, key).messages
    assert [r.id for r in shown] == [r.id for r in before if r.id < second.id] + [new.id]
    back = branches.switch(manager, key, second.id)
    assert [r.id for r in back.messages] == [r.id for r in before]
    assert back.active_leaf_id == before[-1].id


@pytest.mark.sqlite_only
def test_a_sqlite_file_of_the_previous_release_migrates_and_reads_as_before(tmp_path: Path):
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    shutil.copyfile(LEGACY / "previous.sqlite3", folder / DATABASE_FILE)
    legacy = sqlite3.connect(folder / DATABASE_FILE)
    assert legacy.execute("PRAGMA user_version").fetchone()[0] == 13
    legacy.close()
    manager = ChatHistoryManager(Store(folder), clock=FixedClock(AFTER))
    try:
        answers_as_before(manager)
        with manager.store.read() as reading:
            version = reading.connection.execute("PRAGMA user_version").fetchone()[0]
            assert version == SCHEMA_VERSION == 16
            assert reading.connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'messages_by_parent'"
            ).fetchone() == (1,)
        branches_work(manager)
    finally:
        manager.close()


@pytest.fixture
def previous_postgres(pg_cluster: Cluster) -> Iterator[str]:
    """A database at the previous release's schema (9: its migrations, which never change)
    holding the rows that release wrote (``previous_postgres.sql``)."""
    name = "p_tree_previous"
    pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_cluster.execute(f'CREATE DATABASE "{name}"')
    url = pg_cluster.url(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "SCHEMA_VERSION", 9)
        PostgresStore(url).close_after_migrating()
    dump = (LEGACY / "previous_postgres.sql").read_text(encoding="utf-8")
    rows = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with psycopg.connect(url, autocommit=True) as sql:
        sql.execute(rows)  # type: ignore[arg-type]
    try:
        yield url
    finally:
        pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_postgres_database_of_the_previous_release_migrates_and_reads_as_before(
    previous_postgres: str,
):
    manager = ChatHistoryManager(PostgresStore(previous_postgres), clock=FixedClock(AFTER))
    try:
        answers_as_before(manager)
        with psycopg.connect(previous_postgres) as sql:
            assert sql.execute("SELECT version FROM schema_version").fetchone() == (12,)
            assert sql.execute(
                "SELECT 1 FROM pg_indexes WHERE indexname = 'messages_by_parent'"
            ).fetchone() == (1,)
        branches_work(manager)
    finally:
        manager.close()
