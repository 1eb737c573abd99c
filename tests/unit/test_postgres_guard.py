"""No member role can lock a table of history whole (schema version 8, issue 35 item 7): members
hold ``SELECT, INSERT`` and column-level ``UPDATE`` on them, a delete flags the rows ``gone`` and
the owner's trigger deletes them. On the throwaway cluster, with real login roles: ``LOCK TABLE``
refused and another role's writes unhindered, and a version 6 database with two roles' history
migrated, every delete working for each role and none reaching the other's rows."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster

from chat_history.model import Key, Message
from chat_history.service import edits, history, replies, usage
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.replies import ReplyBegin, ReplyChange
from chat_history.settings import load_settings
from chat_history.store.postgres import PostgresStore, dialect, schema
from chat_history.store.postgres.guard import GUARDED

KEY = Key("ws", "conv")
#: The modes that block another role's writes (each conflicts with ROW EXCLUSIVE or stronger
#: than SHARE UPDATE EXCLUSIVE, which the purge's VACUUM FULL waits for anyway).
BLOCKING_MODES = ("SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE")
SOURCE = Path(__file__).resolve().parents[2] / "server" / "chat_history"


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def contents(manager: ChatHistoryManager, key: Key = KEY) -> list[str]:
    return [m.content for m in history.get(manager, key).messages]


def test_every_delete_of_a_guarded_table_in_the_shared_sql_becomes_a_flag():
    # Every ``DELETE FROM <table of history>`` literal of the store's modules, as written.
    found: list[str] = []
    for path in sorted((SOURCE / "store").glob("*.py")):
        for match in re.finditer(r"DELETE FROM (\w+) WHERE ", path.read_text()):
            if match.group(1) in GUARDED:
                found.append(match.group(0))
    assert len(found) >= 10  # edits, queries, calibration, workspaces, replies
    for text in found:
        table = text.split()[2]
        sql = f"{text}workspace = ? AND id IN (?, ?)"
        assert dialect._translate(sql) == (
            f"UPDATE {table} SET gone = TRUE WHERE workspace = %s AND id IN (%s, %s)"
        )
    # A table that is not guarded keeps its delete; a name that only begins like one too.
    assert dialect._translate("DELETE FROM write_locks WHERE lock = ?").startswith("DELETE")
    assert dialect._translate("DELETE FROM messages_x WHERE id = ?").startswith("DELETE")
    assert dialect._translate("\n    DELETE FROM replies WHERE id = ?") == (
        "\n    UPDATE replies SET gone = TRUE WHERE id = %s"
    )


def test_a_member_cannot_lock_a_table_of_history_and_another_roles_writes_go_on(
    pg_cluster: Cluster, pg_roles: Any, pg_database: Any, pg_managers: Any
):
    name, _ = pg_database
    alice = pg_managers(pg_cluster.url(name, user="alice"))
    bob = pg_managers(pg_cluster.url(name, user="bob"))
    history.append(alice, KEY, [U("first"), A("one")])
    history.append(bob, KEY, [U("bob's")])
    with psycopg.connect(pg_cluster.url(name, user="bob")) as sql:
        for table in GUARDED:
            for mode in BLOCKING_MODES:
                sql.execute("SAVEPOINT probe")
                # Before (schema 6): granted, and alice's next write waited out lock_timeout.
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    sql.execute(f"LOCK TABLE {table} IN {mode} MODE")
                sql.execute("ROLLBACK TO SAVEPOINT probe")
        # The strongest he may hold, on every table at once, in one open transaction...
        for table in GUARDED:
            sql.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
        # ... blocks none of alice's writes (a wait would end in 1002 after lock_timeout).
        history.append(alice, KEY, [U("second"), A("two")])
        usage.report(alice, "openai", None, 100, 120)
        history.save_summary(alice, KEY, "a summary")
        edits.delete_turns(alice, KEY, [1])
        history.clear(alice, Key("ws", "other"))
        assert contents(alice) == ["second", "two"]
        sql.rollback()
    assert contents(bob) == ["bob's"]


# -- a version 6 database migrated ---------------------------------------------------------------


@pytest.fixture
def v6_database(
    pg_cluster: Cluster, pg_roles: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The name of a database at schema version 6 owned (and migrated) by an ordinary role,
    ``keeper``, not a superuser: row-level security holds the owner's trigger too."""
    name = "p_guard_v6"
    pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_cluster.execute("DROP ROLE IF EXISTS keeper")
    pg_cluster.execute("CREATE ROLE keeper LOGIN")
    pg_cluster.execute(f'CREATE DATABASE "{name}" OWNER keeper')
    with monkeypatch.context() as patch:
        patch.setattr(schema, "SCHEMA_VERSION", 6)
        PostgresStore(pg_cluster.url(name, user="keeper")).close_after_migrating()
    # Today's server fills it (``_fill``): its look reads the counter's floor (version 9), which
    # version 6's view lacks; the view gets the column (0), the tables stay version 6's, and the
    # migration replaces the view. Its rows are written with their origin (version 10), a
    # column the migration adds where it is missing, and with the columns of conversation trees
    # (version 11): they are there while it fills (``TREE_COLUMNS``) and gone before the
    # migration.
    with psycopg.connect(pg_cluster.url(name, user="keeper"), autocommit=True) as sql:
        sql.execute(
            "CREATE OR REPLACE VIEW change_counter AS SELECT 1 AS only, CASE WHEN count(*) > 1 "
            "THEN -1 ELSE coalesce(max(version), 0) END AS seq, 0::bigint AS floor "
            "FROM store_version"
        )
        sql.execute("ALTER TABLE messages ADD COLUMN origin TEXT")
        sql.execute(TREE_COLUMNS)
    try:
        yield name
    finally:
        pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        pg_cluster.execute("DROP ROLE IF EXISTS keeper")


#: What today's server writes of version 11 (conversation trees) beside version 6's tables.
TREE_COLUMNS = """
ALTER TABLE messages ADD COLUMN parent_id BIGINT, ADD COLUMN active_at BIGINT;
ALTER TABLE conversations ADD COLUMN branches BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN branch_expiry BIGINT, ADD COLUMN switches BIGINT NOT NULL DEFAULT 0;
"""
#: ... taken away again, so that the migration finds version 6's tables.
NO_TREE_COLUMNS = """
ALTER TABLE messages DROP COLUMN parent_id, DROP COLUMN active_at;
ALTER TABLE conversations DROP COLUMN branches, DROP COLUMN branch_expiry, DROP COLUMN switches;
"""


def _fill(manager: ChatHistoryManager, who: str) -> None:
    """History a version 6 server could write (no delete: the dialect's is version 8's)."""
    for n in range(4):
        history.append(manager, KEY, [U(f"{who} question {n}"), A(f"{who} answer {n}")])
    history.append(manager, Key("ws", "spare"), [U(f"{who} zqpxw-spare")])
    history.save_summary(manager, KEY, f"{who}'s summary")
    row = replies.begin(manager, Key("ws", "streaming"), ReplyBegin())
    replies.update(
        manager, Key("ws", "streaming"), row.id, ReplyChange(content_delta=f"{who} part")
    )


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    return [p.name for p in sorted(folder.iterdir()) if p.is_file() and needle in p.read_bytes()]


def _counts(sql: psycopg.Connection[Any]) -> dict[str, int]:
    counted = {}
    for table in GUARDED:
        row = sql.execute(f"SELECT count(*) FROM {table}").fetchone()
        counted[table] = int(row[0]) if row else -1
    return counted


def test_a_version_6_database_migrated_keeps_every_history_and_each_roles_deletes_work(
    pg_cluster: Cluster, v6_database: str, monkeypatch: pytest.MonkeyPatch
):
    name = v6_database
    url: Callable[[str], str] = lambda user: pg_cluster.url(name, user=user)  # noqa: E731
    keep_two = load_settings({"maxMessages": 2}).settings
    made: list[ChatHistoryManager] = []

    def manager(user: str) -> ChatHistoryManager:
        made.append(ChatHistoryManager(PostgresStore(url(user), purge_seconds=3600)))
        return made[-1]

    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema, "SCHEMA_VERSION", 6)
            for who in ("alice", "bob"):
                _fill(manager(who), who)
            for opened in made:
                opened.close()
        made.clear()
        with psycopg.connect(url("keeper"), autocommit=True) as sql:
            sql.execute(NO_TREE_COLUMNS)
        PostgresStore(url("keeper")).close_after_migrating()  # the owner upgrades, as documented
        with psycopg.connect(url("keeper")) as sql:
            assert sql.execute("SELECT version FROM schema_version").fetchone() == (12,)
        alice, bob = manager("alice"), manager("bob")
        # Every history intact.
        for who, opened in (("alice", alice), ("bob", bob)):
            assert contents(opened)[:2] == [f"{who} question 0", f"{who} answer 0"]
            assert len(contents(opened)) == 8
            assert history.get_summary(opened, KEY) is not None
        with psycopg.connect(url("bob")) as sql:
            before = _counts(sql)
            # Bob cannot flag alice's rows (row-level security), nor delete or lock them.
            for table in GUARDED:
                flagged = sql.execute(f"UPDATE {table} SET gone = TRUE WHERE owner = 'alice'")
                assert flagged.rowcount == 0, table
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    sql.execute(f"DELETE FROM {table} WHERE owner = 'alice'")
                sql.rollback()
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    sql.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                sql.rollback()
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    sql.execute(f"UPDATE {table} SET owner = 'alice'")
                sql.rollback()
        with psycopg.connect(url("keeper")) as sql:
            # The owner's own policies reach flagged rows only: a plain delete of a member's
            # rows that are not flagged deletes nothing.
            for table in GUARDED:
                deleted = sql.execute(f"DELETE FROM {table} WHERE owner = 'alice'")
                assert deleted.rowcount == 0, table
            sql.commit()
        # Each role's deletes: turns, an edit (the old text replaced), a summary, a prune (the
        # retention of maxMessages 2), a streaming reply with its parts, a whole conversation.
        for who, opened in (("alice", alice), ("bob", bob)):
            first = history.get(opened, KEY).messages[0]
            edits.edit_message(opened, KEY, first.id, MessageEdit(content=f"{who} redacted"))
            edits.delete_turns(opened, KEY, [2])
            assert history.delete_summary(opened, KEY)
            plan = usage.retain(opened.under(keep_two), KEY)
            assert plan.report is not None and plan.report.dropped_messages > 0
            assert len(contents(opened)) == 2
            assert history.clear(opened, Key("ws", "streaming")) == 1
            assert history.clear(opened, Key("ws", "spare")) == 1
            usage.report(opened, "openai", None, 100, 120)
        for who, opened in (("alice", alice), ("bob", bob)):
            assert contents(opened) == [f"{who} question 3", f"{who} answer 3"]
            assert history.get_summary(opened, KEY) is None
            assert contents(opened, Key("ws", "spare")) == []
        with psycopg.connect(url("bob")) as sql:
            after = _counts(sql)
            assert (after["replies"], after["reply_parts"]) == (0, 0)
            assert before["replies"] == 1 and before["reply_parts"] >= 1
            assert after["messages"] == 2 and after["summaries"] == 0
        # What was deleted leaves the relation files at the owner's purge.
        pg_cluster.execute("CHECKPOINT", name)
        assert _files_holding(pg_cluster.database_folder(name), b"zqpxw"), "dead tuples first"
        assert PostgresStore(url("keeper")).purge_now()
        pg_cluster.execute("CHECKPOINT", name)
        assert _files_holding(pg_cluster.database_folder(name), b"zqpxw") == []
        assert _files_holding(pg_cluster.database_folder(name), b"qpx") == []  # a trigram
    finally:
        for opened in made:
            opened.close()
