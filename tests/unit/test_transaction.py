"""The store's transaction object on a real database (both engines): every change of one
``write()`` commits together, and an operation that fails inside it changes nothing — not the
database, not what the connection remembers (cache, tail), not what another connection reads."""

from __future__ import annotations

import pytest
from tests.unit.conftest import MakeStore

from chat_history.model import Key, Message, Summary
from chat_history.store import HistoryStore

KEY = Key("ws", "c")


class Boom(Exception):
    pass


def user(text: str) -> Message:
    return Message(role="user", content=text, timestamp=1)


def contents(store: HistoryStore) -> list[str]:
    with store.read() as tx:
        return [row.content for row in tx.all_rows(KEY)]


pytestmark = pytest.mark.engines


@pytest.fixture
def store(make_store: MakeStore) -> HistoryStore:
    opened = make_store()
    with opened.write() as tx:
        tx.insert(KEY, [(user("kept"), 1, 1)], tx.totals(KEY), 1)
    return opened


def test_a_write_commits_every_change_together(store: HistoryStore, make_store: MakeStore) -> None:
    with store.write() as tx:
        _, totals = tx.insert(KEY, [(user("two"), 2, 3)], tx.totals(KEY), 5)
        tx.save_summary(KEY, Summary(summary="gist", updated_at=5))
    other = make_store()
    try:
        with other.read() as tx:
            assert [r.content for r in tx.all_rows(KEY)] == ["kept", "two"]
            assert tx.totals(KEY) == totals and totals.message_count == 2 and totals.tokens == 4
            assert tx.summary(KEY) == Summary(summary="gist", updated_at=5)
    finally:
        other.close()
        store.close()


def test_a_failed_operation_changes_nothing(store: HistoryStore, make_store: MakeStore) -> None:
    contents(store)  # the conversation is cached, and the tail remembered, before the failure
    with store.snapshot() as tx:
        before = tx.totals(KEY)
    with pytest.raises(Boom), store.write() as tx:
        tx.insert(KEY, [(user("lost"), 2, 1)], tx.totals(KEY), 5)
        tx.save_summary(KEY, Summary(summary="lost", updated_at=5))
        tx.delete_rows(KEY, [row.id for row in tx.rows_from(KEY, 0)])
        raise Boom
    assert contents(store) == ["kept"]
    with store.snapshot() as tx:
        assert tx.totals(KEY) == before
        assert tx.summary(KEY) is None
        assert [r.content for r in tx.newest_first(KEY)] == ["kept"]
    other = make_store()
    try:
        assert contents(other) == ["kept"]
    finally:
        other.close()
        store.close()


def test_a_failed_clear_keeps_the_conversation(store: HistoryStore) -> None:
    with pytest.raises(Boom), store.write() as tx:
        assert tx.clear(KEY) == 1
        raise Boom
    assert contents(store) == ["kept"]
    with store.write() as tx:
        stored, _ = tx.insert(KEY, [(user("next"), 2, 1)], tx.totals(KEY), 9)
    assert contents(store) == ["kept", "next"] and stored[0].turn == 2
    store.close()
