"""A PostgreSQL write whose connection is lost as it commits (issue 35 item 6): the outcome is
unknown to the server until it asks again. Each write carries a token committed with it; the
server connects again and reads it: the result when the write committed, 1002 only when it did
not, so a client that retries after a 1002 never doubles a row. The database kills the server's
backend at the commit, on the throwaway cluster: once after the commit record (synchronous
replication to a standby that never answers holds the committed transaction's answer back), once
before it (a deferred trigger stalls the commit)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster

from chat_history.errors import StorageError
from chat_history.model import Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager

KEY = Key("ws", "conv")


def U(text: str) -> Message:
    return Message(role="user", content=text)


def kill_the_server_backend_waiting_on(cluster: Cluster, name: str, wait_event: str) -> None:
    """Wait until the server's backend on database ``name`` waits on ``wait_event``, then
    terminate it (the server's connection drops in the middle of its COMMIT)."""
    give_up = time.monotonic() + 20
    with psycopg.connect(cluster.url(), autocommit=True) as sql:
        while time.monotonic() < give_up:
            killed = sql.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = 'chat-history-server' AND wait_event = %s",
                (name, wait_event),
            ).fetchall()
            if killed:
                return
            time.sleep(0.02)
    raise AssertionError(f"the server's commit never waited on {wait_event}")


def append_in_thread(manager: ChatHistoryManager, text: str) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(history.append(manager, KEY, [U(text)]))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.fixture
def standby_never_answers(pg_cluster: Cluster, pg_database: Any) -> Iterator[None]:
    """Commits on the test's database wait for a synchronous standby that does not exist (the
    commit record is written; the answer waits), and only there: every other database commits
    locally. Put back after the test."""
    name, _ = pg_database
    pg_cluster.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = on')
    pg_cluster.execute("ALTER SYSTEM SET synchronous_commit = local")
    pg_cluster.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    try:
        yield
    finally:
        pg_cluster.execute("ALTER SYSTEM RESET synchronous_standby_names")
        pg_cluster.execute("ALTER SYSTEM RESET synchronous_commit")
        pg_cluster.execute("SELECT pg_reload_conf()")


def test_a_write_that_committed_as_its_connection_dropped_answers_its_result(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any, standby_never_answers: None
):
    name, url = pg_database
    manager = pg_managers(url)
    history.append(
        manager, KEY, [U("before")]
    )  # the server's connection opens before the standby rule
    pg_cluster.execute("SELECT pg_reload_conf()")
    thread, outcome = append_in_thread(manager, "committed, answer lost")
    kill_the_server_backend_waiting_on(pg_cluster, name, "SyncRep")
    thread.join(60)
    pg_cluster.execute("ALTER SYSTEM RESET synchronous_standby_names")
    pg_cluster.execute("SELECT pg_reload_conf()")
    # Before: 1002 ("terminating connection due to administrator command") for a stored row.
    assert not isinstance(outcome[0], BaseException), outcome[0]
    stored = [m.content for m in outcome[0].messages]
    assert stored == ["committed, answer lost"]
    rows = history.get(manager, KEY).messages
    assert [m.content for m in rows] == ["before", "committed, answer lost"]
    assert rows[-1].id == outcome[0].messages[0].id
    history.append(manager, KEY, [U("after")])  # the server goes on writing on its new connection
    assert [m.content for m in history.get(manager, KEY).messages][-1] == "after"


def test_a_write_killed_before_its_commit_record_answers_1002_and_a_retry_stores_it_once(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any
):
    name, url = pg_database
    with psycopg.connect(url, autocommit=True) as sql:
        sql.execute(
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.content = 'stalled at commit' THEN PERFORM pg_sleep(30); END IF; "
            "RETURN NULL; END $$"
        )
        sql.execute(
            "CREATE CONSTRAINT TRIGGER stall AFTER INSERT ON messages DEFERRABLE INITIALLY "
            "DEFERRED FOR EACH ROW EXECUTE FUNCTION stall()"
        )
    manager = pg_managers(url)
    history.append(manager, KEY, [U("before")])
    thread, outcome = append_in_thread(manager, "stalled at commit")
    kill_the_server_backend_waiting_on(pg_cluster, name, "PgSleep")
    thread.join(60)
    assert isinstance(outcome[0], StorageError)
    assert [m.content for m in history.get(manager, KEY).messages] == ["before"]
    with psycopg.connect(url, autocommit=True) as sql:
        sql.execute("DROP TRIGGER stall ON messages")
    history.append(manager, KEY, [U("stalled at commit")])  # the client's retry
    assert [m.content for m in history.get(manager, KEY).messages] == [
        "before",
        "stalled at commit",
    ]
