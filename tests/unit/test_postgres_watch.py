"""The change watch's round trips on PostgreSQL (issue 35 item 15): a window's small request
after another window's commit costs what it costs on a quiet database: while another window
writes to the workspace, the look reads the marked conversations' fingerprints and newest rows
with the marks (store.postgres.folded), so the watch's refresh needs no statement; the first
commit after a quiet while costs one statement more (the refresh), and nothing re-reads the
counter, the marks, the tails or the cache. Counted as statements sent to the database over
real connections (psycopg's ``cursor_factory``: every statement of the store goes through a
cursor), for an ordinary role and for the superuser, since row-level security changes the
plans, not the count. What the folded look finds is told with the same reasons as the refresh.

Before the change marks the request after another window's append took 14 statements (the
version twice, the counter and the marks twice, each marked conversation's fingerprint and
growth, the small conversation's totals again, then the request's own) against 5 on a quiet
database; before the fold, one more than quiet."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import psycopg
import pytest
from tests.pgcluster import Cluster

from chat_history.model import Key, Message
from chat_history.policy.changes import Change
from chat_history.service import conversations, edits, history
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch
from chat_history.store.postgres import PostgresStore, marks
from chat_history.store.postgres.folded import WINDOW

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
    raw = store.link.raw
    assert raw is not None
    raw.cursor_factory = CountingCursor


def statements(run: Callable[[], object]) -> int:
    before = CountingCursor.sent
    run()
    return CountingCursor.sent - before


def counted_poll(watch: ChangeWatch) -> tuple[int, list[Change]]:
    """The statements of one look of the watch, and what it found."""
    found: list[Change] = []
    return statements(lambda: found.extend(watch.poll())), found


@pytest.fixture(autouse=True)
def folding_throughout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looks fold for as long as a test runs, however slow the machine (no clock in it)."""
    monkeypatch.setattr(marks, "FOLD_SECONDS", 3600.0)


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
    stored = history.append(manager, key, [Message(role="user", content=text)])
    return stored.messages[-1].id


def test_a_look_after_anothers_commit_costs_one_statement_while_another_writes(
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
        assert history.get(mine, SMALL).messages[-1].content == "hi"

    found: list[Change] = []

    def poll() -> None:
        found.extend(watch.poll())

    poll()  # the first look reads the workspace whole
    get()  # the small conversation is cached
    quiet = statements(get)
    assert statements(poll) == 1  # the look: the counter has not moved
    newest = say(other, Key(W, "c3"), "two")
    assert statements(poll) == 2  # the first after a quiet while: the look, c3's refresh
    assert found == [Change("c3", newest, "append")]
    assert statements(get) == quiet  # still cached, its tail kept: nothing read again
    found.clear()
    newest = say(other, Key(W, "c3"), "three")
    assert statements(poll) == 1  # another window writes: the look reads c3 with its mark
    assert found == [Change("c3", newest, "append")]
    assert statements(poll) == 1  # nothing moved: the look alone
    found.clear()
    say(other, Key(W, "c1"), "three")
    say(other, Key(W, "c4"), "three")
    assert statements(poll) == 1  # both marked conversations with the marks
    assert sorted(c.conversation for c in found) == ["c1", "c4"]
    say(other, SMALL, "hi")
    assert statements(poll) == 1
    assert statements(get) > quiet  # the one marked conversation requested is read again
    assert statements(get) == quiet
    say(other, Key("file:///elsewhere", "x"), "four")
    assert statements(poll) == 1  # nothing of the workspace to re-read
    assert statements(get) == quiet


def test_what_the_folded_look_finds_is_told_with_its_reason(
    url: str, pg_managers: Callable[..., ChatHistoryManager]
) -> None:
    """Each kind of change, found by the look that reads the marked conversation with its mark
    (one statement), has the reason the refresh gives; growth past the newest rows the look
    reads (``WINDOW``) is read by the refresh (one statement more), still an append."""
    from chat_history.service.conversations import ConversationUpdate
    from chat_history.service.edits import MessageEdit

    mine, other = pg_managers(url), pg_managers(url)
    key = Key(W, "c")
    clock = iter(range(1_000_000, 2_000_000, 1_000))
    other = attrs.evolve(other, clock=lambda: next(clock))  # each write at its own millisecond
    first = say(other, key, "one")
    last = say(other, key, "two")
    watch = ChangeWatch(mine.store, lambda: W)
    assert isinstance(mine.store, PostgresStore)
    watch.poll()
    say(other, Key(W, "warm"), "x")  # a first commit: the looks fold from the next one
    assert [c.conversation for c in watch.poll()] == ["warm"]
    counted(mine.store)
    many = [Message(role="user", content=f"m{n}") for n in range(WINDOW + 1)]
    steps: list[tuple[str, int, Callable[[], object]]] = [
        ("append", 1, lambda: say(other, key, "three")),
        ("append", 2, lambda: history.append(other, key, many)),
        (
            "edit",
            1,
            lambda: edits.edit_message(other, key, first, MessageEdit(content="edited text")),
        ),
        ("summary", 1, lambda: history.save_summary(other, key, "a summary", first)),
        (
            "title",
            1,
            lambda: conversations.update(other, key, ConversationUpdate(metadata={"m": 2})),
        ),
        ("delete", 1, lambda: edits.truncate(other, key, last)),
        ("append", 1, lambda: say(other, Key(W, "new"), "first")),
        # A clear deletes the conversation's marks (schema 9): the watch reads which of its
        # conversations still exist and refreshes the one gone, two statements more.
        ("clear", 3, lambda: history.clear(other, key)),
    ]
    for reason, cost, change in steps:
        change()
        sent, found = counted_poll(watch)
        assert sent == cost, reason
        assert [c.reason for c in found] == [reason], (reason, found)
        rows = history.get(other, Key(W, found[0].conversation)).messages
        assert found[0].last_id == (rows[-1].id if rows else None)
    # Its own write, then another's elsewhere: only the other's is told, and the look alone
    # answers for both (its own conversation is as its write left it).
    say(mine, Key(W, "new"), "mine")
    assert watch.poll() == []
    theirs = say(other, Key(W, "c2"), "theirs")
    assert counted_poll(watch) == (1, [Change("c2", theirs, "append")])
