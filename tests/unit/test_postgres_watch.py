"""The change watch's round trips on PostgreSQL (issue 35 item 15): a window's small request
after another window's commit costs one statement more than on a quiet database (the marked
conversation's fingerprint and growth, read together), not a re-read of the counter, the marks,
the tails and the cache. Counted as statements sent to the database over real connections
(psycopg's ``cursor_factory``: every statement of the store goes through a cursor), for an
ordinary role and for the superuser, since row-level security changes the plans, not the count.

Before this change the request after another window's append took 14 statements (the version
twice, the counter and the marks twice, each marked conversation's fingerprint and growth, the
small conversation's totals again, then the request's own) against 5 on a quiet database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster

from chat_history.model import Key, Message
from chat_history.policy.changes import Change
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch
from chat_history.store.postgres import PostgresStore

W = "file:///w"
SMALL = Key(W, "small")


class CountingCursor(psycopg.Cursor[Any]):
    """A cursor that counts the statements it sends (one ``execute``: one round trip)."""

    sent = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        CountingCursor.sent += 1
        return super().execute(*args, **kwargs)


def counted(store: PostgresStore) -> None:
    with store.read():  # connected
        pass
    raw = store._raw
    assert raw is not None
    raw.cursor_factory = CountingCursor


def statements(run: Callable[[], object]) -> int:
    before = CountingCursor.sent
    run()
    return CountingCursor.sent - before


@pytest.fixture(params=["member", "superuser"])
def url(pg_database: tuple[str, str], pg_cluster: Cluster, request: Any) -> Iterator[str]:
    name, url = pg_database
    if request.param == "superuser":
        yield url
        return
    pg_cluster.execute("DROP ROLE IF EXISTS watcher")
    pg_cluster.execute("CREATE ROLE watcher LOGIN")
    try:
        yield pg_cluster.url(name, "watcher")
    finally:
        pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        pg_cluster.execute("DROP ROLE IF EXISTS watcher")


def say(manager: ChatHistoryManager, key: Key, text: str) -> int:
    stored = manager.append(key, [Message(role="user", content=text)])
    return stored.messages[-1].id


def test_a_look_after_anothers_commit_costs_two_statements_and_the_cache_stays(
    url: str, pg_managers: Callable[..., ChatHistoryManager]
) -> None:
    mine, other = pg_managers(url), pg_managers(url)
    for n in range(5):
        say(other, Key(W, f"c{n}"), "one")
    say(other, SMALL, "hi")
    watch = ChangeWatch(mine.store, lambda: W)
    assert isinstance(mine.store, PostgresStore)
    counted(mine.store)

    def get() -> None:
        assert mine.get(SMALL).messages[-1].content == "hi"

    found: list[Change] = []

    def poll() -> None:
        found.extend(watch.poll())

    poll()  # the first look reads the workspace whole
    get()  # the small conversation is cached
    quiet = statements(get)
    assert statements(poll) == 1  # the look: the counter has not moved
    newest = say(other, Key(W, "c3"), "two")
    assert statements(poll) == 2  # the look (the counter and the marks), c3's refresh
    assert found == [Change("c3", newest, "append")]
    assert statements(get) == quiet  # still cached, its tail kept: nothing read again
    found.clear()
    say(other, Key(W, "c1"), "three")
    say(other, Key(W, "c4"), "three")
    assert statements(poll) == 2  # both marked conversations in one statement
    assert sorted(c.conversation for c in found) == ["c1", "c4"]
    say(other, SMALL, "hi")
    assert statements(poll) == 2
    assert statements(get) > quiet  # the one marked conversation requested is read again
    assert statements(get) == quiet
    say(other, Key("file:///elsewhere", "x"), "four")
    assert statements(poll) == 1  # nothing of the workspace to re-read
    assert statements(get) == quiet
