"""Conversation trees between database roles on PostgreSQL (protocol.md "Version 5" →
Conversation trees; "Version 3" → Storage engines: each role sees only its rows): with two real
login roles under one conversation key, each role's branches are its own (never read, switched,
found or deleted by the other), and the inactive branches' table is guarded like every table
of history (a delete is a flag the owner's trigger acts on)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster

from chat_history.model import Follow, Key, Message
from chat_history.policy.search.rank import SearchScope
from chat_history.service import branches, edits, history, search

KEY = Key("ws", "conv")


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def test_each_roles_branches_are_its_own(
    pg_cluster: Cluster, pg_roles: Any, pg_database: Any, pg_managers: Any
):
    name, _ = pg_database
    alice = pg_managers(pg_cluster.url(name, user="alice"))
    bob = pg_managers(pg_cluster.url(name, user="bob"))
    q, first = history.append(alice, KEY, [U("alice asks"), A("alice's first zebra")]).messages
    history.append(alice, KEY, [A("alice's second")], Follow(q.id))
    bobs = [r.id for r in history.append(bob, KEY, [U("bob asks"), A("bob's answer")]).messages]
    # Bob's tree, search and switches never reach Alice's rows under the same key.
    assert [n.preview for n in branches.tree(bob, KEY).nodes] == ["bob asks", "bob's answer"]
    scope = SearchScope(None, None, ("assistant",))
    assert search.search(bob, scope, "zebra", 10).hits == ()
    assert [h.id for h in search.search(alice, scope, "zebra", 10).hits] == [first.id]
    with pytest.raises(Exception) as caught:
        branches.switch(bob, KEY, first.id)
    assert getattr(caught.value, "field", None) == "id"
    with pytest.raises(Exception) as caught:
        history.append(bob, KEY, [U("x")], Follow(q.id))
    assert getattr(caught.value, "field", None) == "parent_id"
    # With plain SQL, Bob neither reads nor flags Alice's branches.
    with psycopg.connect(pg_cluster.url(name, user="bob"), autocommit=True) as sql:
        assert sql.execute("SELECT count(*) FROM branches").fetchone() == (0,)
        assert sql.execute("UPDATE branches SET gone = TRUE").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege), sql.transaction():
            sql.execute("LOCK TABLE branches IN ACCESS EXCLUSIVE MODE")
    with psycopg.connect(pg_cluster.url(name, user="alice"), autocommit=True) as sql:
        assert sql.execute("SELECT count(*) FROM branches").fetchone() == (1,)
    # Alice deletes her inactive branch (flagged and deleted by the owner's trigger); Bob's
    # rows are untouched.
    assert edits.truncate(alice, KEY, first.id).deleted_messages == 1
    with psycopg.connect(pg_cluster.url(name, user="alice"), autocommit=True) as sql:
        assert sql.execute("SELECT count(*) FROM branches").fetchone() == (0,)
        assert sql.execute("SELECT count(*) FROM messages WHERE gone").fetchone() == (0,)
    assert [r.content for r in history.get(alice, KEY).messages] == ["alice asks", "alice's second"]
    assert [r.id for r in history.get(bob, KEY).messages] == bobs
