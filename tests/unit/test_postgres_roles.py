"""Database roles kept apart on PostgreSQL (protocol.md "Version 3" → Storage engines: each
role sees only its rows; issue 35 item 7: no role reaches what allocates or serializes another
role's writes), with two real login roles on the throwaway cluster: what plain SQL can and cannot
do to another role's history, ids and locks."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster
from tests.unit.conftest import held_write

from chat_history.model import Key, Message
from chat_history.policy.search.rank import SearchScope
from chat_history.service import conversations, history, search, usage
from chat_history.service.manager import ChatHistoryManager

KEY = Key("ws", "conv")
#: The database-wide advisory key every write held before schema version 4 ('chwr').
OLD_GLOBAL_KEY = 0x63687772
#: The tables every write changes besides the history: counter, lock rows, commit tokens.
WRITE_PATH = ("write_locks", "store_version", "write_tokens")


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def found(manager: ChatHistoryManager, query: str) -> list[str]:
    scope = SearchScope(None, None, ("user", "assistant"))
    return [hit.snippet for hit in search.search(manager, scope, query, 50).hits]


def test_two_roles_never_read_change_or_delete_each_others_history(
    pg_cluster: Cluster, pg_roles: Any, pg_database: Any, pg_managers: Any
):
    name, _ = pg_database
    alice = pg_managers(pg_cluster.url(name, user="alice"))
    bob = pg_managers(pg_cluster.url(name, user="bob"))
    history.append(alice, KEY, [U("alice's secret plan"), A("noted")])
    history.save_summary(alice, KEY, "alice's summary")
    history.append(bob, Key("ws", "other"), [U("bob's note")])
    # Bob's server: not a row of Alice's, under the same workspace and conversation id.
    assert history.get(bob, KEY).messages == ()
    assert [
        c.conversation_id for c in conversations.list_page(bob, "ws", None, None).conversations
    ] == ["other"]
    history.append(bob, KEY, [U("bob in the same conversation id")])
    assert [m.content for m in history.get(alice, KEY).messages] == ["alice's secret plan", "noted"]
    # Bob with plain SQL.
    with psycopg.connect(pg_cluster.url(name, user="bob"), autocommit=True) as sql:
        seen = sql.execute("SELECT content FROM messages").fetchall()
        assert seen == [("bob's note",), ("bob in the same conversation id",)]
        assert sql.execute("SELECT count(*) FROM summaries").fetchone() == (0,)
        changed = sql.execute("UPDATE messages SET content = 'x' WHERE owner = 'alice'")
        assert changed.rowcount == 0
        # A delete is a flag (schema version 8): Bob's reaches none of Alice's rows.
        deleted = sql.execute("UPDATE messages SET gone = TRUE WHERE content LIKE 'alice%'")
        assert deleted.rowcount == 0
        flagged = sql.execute("UPDATE conversations SET gone = TRUE WHERE owner = 'alice'")
        assert flagged.rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql.execute("DELETE FROM messages WHERE content LIKE 'alice%'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql.execute(
                "INSERT INTO messages (workspace, conversation, turn, role, content, "
                "timestamp, tokens, owner) VALUES ('ws', 'conv', 9, 'user', 'forged', 0, 1, "
                "'alice')"
            )
    assert [m.content for m in history.get(alice, KEY).messages] == ["alice's secret plan", "noted"]
    assert history.get(alice, KEY).summary is not None
    assert [m.content for m in history.get(bob, KEY).messages] == [
        "bob in the same conversation id"
    ]
    # Search sees one's own rows only.
    assert found(bob, "secret") == []
    assert found(alice, "secret") == ["alice's secret plan"]


def test_a_role_cannot_move_or_take_the_ids_of_another_roles_writes(
    pg_cluster: Cluster, pg_roles: Any, pg_database: Any, pg_managers: Any
):
    name, _ = pg_database
    alice = pg_managers(pg_cluster.url(name, user="alice"))
    history.append(alice, KEY, [U("one"), A("two")])
    usage.report(alice, "openai", "m", 100, 120)
    with psycopg.connect(pg_cluster.url(name, user="bob"), autocommit=True) as sql:
        # Before: bob set the shared sequences back, and alice's writes hit taken ids (1002).
        for sequence in ("message_ids", "calibration_samples_id_seq"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                sql.execute("SELECT setval(%s, 1)", (sequence,))
        # Rows with the ids alice's next writes will take: bob's own rows, they block nothing.
        (taken,) = sql.execute("SELECT nextval('message_ids')").fetchone() or (0,)
        sql.execute(
            "INSERT INTO messages (id, workspace, conversation, turn, role, content, timestamp, "
            "tokens) SELECT %s + g, 'ws', 'conv', g, 'user', 'squatted', 0, 1 "
            "FROM generate_series(1, 20) g",
            (taken,),
        )
        (calibrated,) = sql.execute("SELECT nextval('calibration_samples_id_seq')").fetchone() or (
            0,
        )
        sql.execute(
            "INSERT INTO calibration_samples (id, kind, model, ratio) "
            "SELECT %s + g, 'openai', 'm', 1.0 FROM generate_series(1, 20) g",
            (calibrated,),
        )
    for n in range(3):
        history.append(alice, KEY, [U(f"q{n}"), A(f"a{n}")])
    rows = history.get(alice, KEY).messages
    assert [m.content for m in rows] == ["one", "two", "q0", "a0", "q1", "a1", "q2", "a2"]
    assert [m.id for m in rows] == sorted({m.id for m in rows})
    assert usage.report(alice, "openai", "m", 100, 130).samples == 2
    forked = conversations.fork(alice, KEY, Key("ws", "copy"))
    assert [m.content for m in history.get(alice, Key("ws", "copy")).messages] == [
        m.content for m in rows
    ]
    assert forked is not None


def test_no_role_can_hold_what_serializes_another_roles_writes(
    pg_cluster: Cluster, pg_roles: Any, pg_database: Any, pg_managers: Any
):
    name, _ = pg_database
    alice = pg_managers(pg_cluster.url(name, user="alice"))
    bob = pg_managers(pg_cluster.url(name, user="bob"))
    history.append(alice, KEY, [U("first")])
    history.append(bob, KEY, [U("bob's first")])
    # Bob's own server inside a write of the same workspace and conversation id...
    gate, thread = held_write(bob, KEY, "bob held")
    try:
        with psycopg.connect(pg_cluster.url(name, user="bob")) as sql:
            # ... and bob's plain session: no table of the write path can be locked whole...
            tables = [t for t in WRITE_PATH if _exists(sql, t)]
            for table in tables:
                sql.execute("SAVEPOINT probe")
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    sql.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                sql.execute("ROLLBACK TO SAVEPOINT probe")
            # ... and he holds every lock he can reach: the old database-wide key, every row
            # (but those his own server holds).
            sql.execute("SELECT pg_advisory_xact_lock(%s)", (OLD_GLOBAL_KEY,))
            for table in tables:
                sql.execute(f"SELECT 1 FROM {table} FOR UPDATE SKIP LOCKED")
            # Before: alice's writes waited past lock_timeout behind bob's keys (1002).
            history.append(alice, KEY, [U("second")])
            usage.report(alice, "openai", None, 100, 120)  # a write of alice's whole history
            conversations.fork(alice, KEY, Key("ws", "fork"))
            sql.rollback()
        assert tables == list(WRITE_PATH)  # (the tables of schema version 4)
    finally:
        gate.go.set()
        thread.join(30)
    assert thread.errors == []  # type: ignore[attr-defined]
    assert [m.content for m in history.get(alice, KEY).messages] == ["first", "second"]
    assert [m.content for m in history.get(bob, KEY).messages] == ["bob's first", "bob held"]


def _exists(sql: psycopg.Connection[Any], table: str) -> bool:
    row = sql.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])
