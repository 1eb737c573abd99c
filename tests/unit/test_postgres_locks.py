"""PostgreSQL writers under per-conversation locks (protocol.md "Version 3" → Storage engines;
server-database.md §3.6): writers of different conversations run side by side, writers of one
conversation wait for each other, several processes on many conversations lose and double
nothing, and a deadlock the database breaks by aborting the server's write is retried, never
answered as a lost write."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster, run_workers
from tests.unit.conftest import held_write

from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch
from chat_history.store import Key

A_KEY = Key("ws", "a")
B_KEY = Key("ws", "b")
#: The key of the lock row of a role's whole history (``store.postgres.locks.WHOLE``): written
#: out, so the test speaks plain SQL to it.
WHOLE = 0


def U(text: str) -> Message:
    return Message(role="user", content=text)


def R(text: str) -> Message:
    return Message(role="assistant", content=text)


def test_a_write_on_another_conversation_runs_while_one_is_held(pg_database: Any, pg_managers: Any):
    _, url = pg_database
    holder, other = pg_managers(url), pg_managers(url)
    history.append(other, B_KEY, [U("b first")])
    gate, thread = held_write(holder, A_KEY, "a held")
    try:
        # Done while the other write is still held (the gate opens only below): it did not
        # wait for it, where it waited past lock_timeout before and answered 1002.
        history.append(other, B_KEY, [U("b while a is held")])
    finally:
        gate.go.set()
        thread.join(30)
    assert thread.errors == []  # type: ignore[attr-defined]
    assert [m.content for m in history.get(other, A_KEY).messages] == ["a held"]
    assert [m.content for m in history.get(other, B_KEY).messages] == [
        "b first",
        "b while a is held",
    ]


def test_a_write_on_the_same_conversation_waits_for_the_held_one(
    pg_database: Any, pg_managers: Any
):
    _, url = pg_database
    holder, other = pg_managers(url), pg_managers(url)
    gate, thread = held_write(holder, A_KEY, "a held")
    done = threading.Event()

    def second() -> None:
        history.append(other, A_KEY, [U("a second")])
        done.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    try:
        assert not done.wait(1.0)  # it waits for the held write's conversation lock
    finally:
        gate.go.set()
        thread.join(30)
        waiter.join(30)
    assert done.is_set()
    rows = history.get(other, A_KEY).messages
    assert [(m.content, m.turn) for m in rows] == [("a held", 1), ("a second", 2)]


def server_waits_on_a_lock(sql: psycopg.Connection[Any], timeout: float = 20) -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        row = sql.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            "'chat-history-server' AND wait_event_type = 'Lock'"
        ).fetchone()
        if row and row[0]:
            return
        time.sleep(0.02)
    raise AssertionError("the server's write never waited on the row lock")


def test_a_deadlock_that_aborts_the_servers_write_is_retried(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any
):
    name, url = pg_database
    # The server's connection finds the deadlock first (so the database aborts its write); the
    # plain session below waits far longer before it would look.
    pg_cluster.execute(f"ALTER DATABASE \"{name}\" SET deadlock_timeout = '100ms'")
    manager = pg_managers(url)
    history.append(manager, A_KEY, [U("first")])
    # The change watch of this server's session: its own write, aborted once and retried, is
    # never reported as another process's change.
    watch = ChangeWatch(manager.store, lambda: A_KEY.workspace)
    assert watch.poll() == []
    with psycopg.connect(url, autocommit=True) as sql, psycopg.connect(url) as other:
        other.execute("SET deadlock_timeout = '20s'")
        # A row every write changes at its commit (the store's version counter)...
        other.execute("SELECT version FROM store_version FOR UPDATE")
        errors: list[BaseException] = []

        def append() -> None:
            try:
                history.append(manager, A_KEY, [U("second")])
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=append)
        thread.start()
        server_waits_on_a_lock(sql)
        # ... then the lock the server's write holds: a cycle, broken by aborting the server's.
        other.execute("SELECT 1 FROM write_locks WHERE lock = %s FOR UPDATE", (WHOLE,))
        other.commit()
        thread.join(30)
    assert errors == []  # answered 1002 (deadlock detected) before the retry
    rows = history.get(manager, A_KEY).messages
    assert [(m.content, m.turn) for m in rows] == [("first", 1), ("second", 2)]
    assert watch.poll() == []


_WORKER = """
import sys
from chat_history.service import conversations, edits, history
from chat_history.service.edits import MessageEdit
from chat_history.errors import InvalidParams
from chat_history.service.manager import ChatHistoryManager
from chat_history.model import Message
from chat_history.settings import load_settings
from chat_history.store import Key
from chat_history.store.postgres import PostgresStore
from chat_history.service.watch import ChangeWatch

url, worker, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
manager = ChatHistoryManager(PostgresStore(url), load_settings({"maxMessages": 30}).settings)
own, shared = Key("ws", f"own-{worker}"), Key("ws", "shared")
for n in range(rounds):
    for key in (own, shared):
        question = Message(role="user", content=f"{worker}-{n}")
        answer = Message(role="assistant", content=f"answer {worker}-{n}")
        stored = history.append(manager, key, [question, answer]).messages
        if n % 3 == 2:  # an edit (the same text again) while the others append and prune
            try:
                edits.edit_message(manager, key, stored[0].id, MessageEdit(content=f"{worker}-{n}"))
            except InvalidParams:
                pass  # another process's retention deleted the row first
    if n % 7 == 6:  # a fork takes a block of ids while the others append
        conversations.fork(manager, own, Key("ws", f"fork-{worker}-{n}"))
    if n % 5 == 4:
        history.save_summary(manager, own, f"summary by {worker} at {n}")
        history.get(manager, shared)
manager.close()
"""


def test_processes_on_their_own_and_one_shared_conversation_lose_and_double_nothing(
    pg_database: Any, pg_managers: Any
):
    _, url = pg_database
    workers, rounds = 4, 21
    run_workers(_WORKER, url, workers, rounds)
    with psycopg.connect(url) as sql:
        doubled = sql.execute(
            "SELECT workspace, conversation, turn FROM messages WHERE role = 'user' "
            "GROUP BY workspace, conversation, turn HAVING count(*) > 1"
        ).fetchall()
        counts = dict(
            sql.execute(
                "SELECT c.conversation, c.message_count - (SELECT count(*) FROM messages m "
                "WHERE m.workspace = c.workspace AND m.conversation = c.conversation) "
                "FROM conversations c"
            ).fetchall()
        )
    assert doubled == []
    assert set(counts.values()) == {0}  # every conversation's total is its rows
    reader = pg_managers(url)
    shared = history.get(reader, Key("ws", "shared")).messages
    assert len(shared) == 30
    assert [r.turn for r in shared[::2]] == list(range(shared[0].turn, shared[0].turn + 15))
    assert shared[-1].turn == workers * rounds  # every append got its own turn
    for w in range(workers):
        own = history.get(reader, Key("ws", f"own-w{w}")).messages
        assert [m.content for m in own[::2]] == [f"w{w}-{n}" for n in range(rounds - 15, rounds)]
        assert [r.turn for r in own[::2]] == list(range(rounds - 14, rounds + 1))
        for question, answer in zip(own[::2], own[1::2], strict=True):
            assert answer.content == f"answer {question.content}"
        for n in range(6, rounds, 7):
            fork = history.get(reader, Key("ws", f"fork-w{w}-{n}")).messages
            assert [m.content for m in fork[::2]] == [
                f"w{w}-{k}" for k in range(max(0, n - 14), n + 1)
            ]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_write_that_changes_a_conversation_it_did_not_lock_changes_nothing(
    engine: str, tmp_path: Any, request: pytest.FixtureRequest
):
    from chat_history.store import Store
    from chat_history.store.seam import write_retried

    if engine == "postgres":
        _, url = request.getfixturevalue("pg_database")
        manager = request.getfixturevalue("pg_managers")(url)
    else:
        manager = ChatHistoryManager(Store(tmp_path))
    history.append(manager, B_KEY, [U("b kept")])
    with pytest.raises(RuntimeError, match="locked"):
        write_retried(manager.store, (A_KEY,), lambda tx: tx.clear(B_KEY))
    assert [m.content for m in history.get(manager, B_KEY).messages] == ["b kept"]
    manager.close()
