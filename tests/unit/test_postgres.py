"""PostgreSQL's own guarantees (protocol.md "Version 3" → Storage engines), on the throwaway
cluster: row-level security between two roles with plain SQL, the purge of deleted text from the
relation files, several processes on one conversation, coherence between connections, a restarted
database server, migrations by several servers at once, and the ``database`` option."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.pgcluster import Cluster, run_workers

from chat_history.errors import InvalidParams, StorageError
from chat_history.model import Message
from chat_history.policy.search.rank import SearchScope
from chat_history.service import conversations, edits, history, search, usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import EngineOptions, Key, database_option
from chat_history.store.postgres import PostgresStore
from chat_history.store.postgres.schema import SCHEMA_VERSION
from chat_history.store.postgres.url import check_database

KEY = Key("ws", "conv")


def found(manager: ChatHistoryManager, query: str) -> list[str]:
    scope = SearchScope(None, None, ("user", "assistant"))
    return [hit.snippet for hit in search.search(manager, scope, query, 50).hits]


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


# -- purge ---------------------------------------------------------------------------------------


def files_holding(folder: Path, needle: bytes) -> list[str]:
    return [
        path.name
        for path in sorted(folder.iterdir())
        if path.is_file() and needle in path.read_bytes()
    ]


def test_deleted_text_leaves_the_relation_files_at_the_purge(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any
):
    name, url = pg_database
    manager = pg_managers(url, purge_seconds=3600)
    store = manager.store
    assert isinstance(store, PostgresStore)
    secret = "qzxv-residue-marker-" + "ü" * 3
    folded = "qzxv-residue-marker-uuu"
    history.append(manager, KEY, [U(f"the {secret} text"), A("ok")])
    history.append(manager, Key("ws", "kept"), [U("other history stays")])
    history.save_summary(manager, KEY, f"summary with {secret}")
    history.clear(manager, KEY)
    # Gone from every read and search at once.
    assert history.get(manager, KEY).messages == ()
    assert found(manager, "qzxv") == []
    pg_cluster.execute("CHECKPOINT", name)
    folder = pg_cluster.database_folder(name)
    assert files_holding(folder, secret.encode()), "the test must see the dead tuples first"
    assert store.purge_now()
    pg_cluster.execute("CHECKPOINT", name)
    folder = pg_cluster.database_folder(name)
    assert files_holding(folder, secret.encode()) == []
    assert files_holding(folder, folded.encode()) == []
    assert files_holding(folder, b"zxv") == [], "a trigram of it in the search index"
    assert [m.content for m in history.get(manager, Key("ws", "kept")).messages] == [
        "other history stays"
    ]


def test_an_edit_purges_the_old_text_within_the_interval(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any
):
    name, url = pg_database
    manager = pg_managers(url, purge_seconds=0.2)
    stored = history.append(manager, KEY, [U("old wording jqxk-edit-marker"), A("ok")]).messages
    from chat_history.service.edits import MessageEdit

    edits.edit_message(manager, KEY, stored[0].id, MessageEdit(content="new wording"))
    store = manager.store
    assert isinstance(store, PostgresStore)
    for _ in range(600):  # due in 0.2 s; a loaded machine's VACUUM FULL may take seconds
        if store.purges:
            break
        threading.Event().wait(0.1)
    assert store.purges == 1
    pg_cluster.execute("CHECKPOINT", name)
    assert files_holding(pg_cluster.database_folder(name), b"jqxk-edit-marker") == []


# -- several processes ---------------------------------------------------------------------------

_WORKER = """
import sys
from chat_history.service import edits, history
from chat_history.service.edits import MessageEdit
from chat_history.errors import InvalidParams
from chat_history.service.manager import ChatHistoryManager
from chat_history.model import Message
from chat_history.settings import load_settings
from chat_history.store import Key
from chat_history.store.postgres import PostgresStore

url, worker, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
manager = ChatHistoryManager(PostgresStore(url), load_settings({"maxMessages": 40}).settings)
key = Key("ws", "shared")
for n in range(rounds):
    question = Message(role="user", content=f"{worker}-{n}")
    answer = Message(role="assistant", content=f"answer {worker}-{n}")
    stored = history.append(manager, key, [question, answer]).messages
    if n % 3 == 2:  # an edit (the same text again) while the others append and prune
        try:
            edits.edit_message(manager, key, stored[0].id, MessageEdit(content=f"{worker}-{n}"))
        except InvalidParams:
            pass  # another process's retention deleted the row first
    if n % 5 == 4:
        history.get(manager, key)
        history.save_summary(manager, key, f"summary by {worker} at {n}")
manager.close()
"""


def test_several_processes_on_one_conversation_lose_and_double_nothing(
    pg_database: Any, pg_managers: Any
):
    _, url = pg_database
    workers, rounds = 4, 25
    run_workers(_WORKER, url, workers, rounds)
    with psycopg.connect(url) as sql:
        ids = [r[0] for r in sql.execute("SELECT id FROM messages ORDER BY id").fetchall()]
        total = sql.execute("SELECT message_count FROM conversations").fetchone()
        turns = sql.execute(
            "SELECT turn, count(*) FROM messages WHERE role = 'user' GROUP BY turn "
            "HAVING count(*) > 1"
        ).fetchall()
    # Retention kept the newest 40 rows: 20 whole turns, each user row with its answer.
    assert len(ids) == 40 == len(set(ids))
    assert total == (40,)
    assert turns == []
    rows = history.get(pg_managers(url), Key("ws", "shared")).messages
    assert [r.turn for r in rows[::2]] == list(range(rows[0].turn, rows[0].turn + 20))
    for question, answer in zip(rows[::2], rows[1::2], strict=True):
        assert answer.content == f"answer {question.content}"
    # Every append got its own turn: the highest is the number of appends.
    assert rows[-1].turn == workers * rounds


# -- coherence -----------------------------------------------------------------------------------


def test_each_connection_sees_the_others_changes_at_its_next_request(
    pg_database: Any, pg_managers: Any
):
    _, url = pg_database
    one, two = pg_managers(url), pg_managers(url)
    history.append(one, KEY, [U("first"), A("a1")])
    assert [m.content for m in history.get(two, KEY).messages] == [
        "first",
        "a1",
    ]  # now cached in two
    history.append(one, KEY, [U("second"), A("a2")])
    assert [m.content for m in history.get(two, KEY).messages] == ["first", "a1", "second", "a2"]
    rows = history.get(one, KEY).messages
    edits.truncate(one, KEY, rows[2].id)
    assert [m.content for m in history.get(two, KEY).messages] == ["first", "a1"]
    history.append(two, KEY, [U("third")])
    assert [m.content for m in history.get(one, KEY).messages] == ["first", "a1", "third"]
    history.clear(one, KEY)
    assert history.get(two, KEY).messages == ()


# -- a restarted database server -----------------------------------------------------------------


def test_a_restarted_server_fails_the_write_in_flight_and_the_next_request_reconnects(
    pg_cluster: Cluster, pg_database: Any, pg_managers: Any
):
    _, url = pg_database
    manager = pg_managers(url)
    history.append(manager, KEY, [U("before"), A("kept")])
    store = manager.store
    assert isinstance(store, PostgresStore)
    from chat_history.store.postgres.readings import PostgresTransaction

    with pytest.raises(StorageError), store.write() as tx:
        assert isinstance(tx, PostgresTransaction)
        tx.insert(KEY, [(U("in flight"), 2, 3)], tx.totals(KEY), 0)
        pg_cluster.restart()
    # The next requests connect again; nothing acknowledged is lost, nothing in flight landed.
    assert [m.content for m in history.get(manager, KEY).messages] == ["before", "kept"]
    pg_cluster.restart()
    history.append(manager, KEY, [U("after")])
    assert [m.content for m in history.get(manager, KEY).messages] == ["before", "kept", "after"]


# -- migrations ----------------------------------------------------------------------------------


def test_servers_starting_at_once_on_an_empty_database_migrate_it_once(pg_cluster: Cluster):
    pg_cluster.execute('DROP DATABASE IF EXISTS "p_empty" WITH (FORCE)')
    pg_cluster.execute('CREATE DATABASE "p_empty"')
    url = pg_cluster.url("p_empty")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            PostgresStore(url).close_after_migrating()
        except BaseException as exc:  # pragma: no cover - the assertion shows it
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        with psycopg.connect(url) as sql:
            found = sql.execute("SELECT version FROM schema_version").fetchall()
            assert found == [(SCHEMA_VERSION,)]
    finally:
        pg_cluster.execute('DROP DATABASE IF EXISTS "p_empty" WITH (FORCE)')


# -- the database option -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://me:hunter2@db.example/history",
        "host=db.example dbname=history password=hunter2",
        # issue 35 item 8: a password inside another parameter's value (a connection string or
        # URI there, as libpq expands a database name), and libpq's other secret
        "host=db.example dbname='postgresql://me:hunter2@db.example/db'",
        "host=db.example dbname='host=db.example password=hunter2'",
        "postgresql://me@db.example/h?dbname=postgres://me:hunter2@db.example/db",
        "postgresql://me@db.example/h?sslpassword=hunter2",
        "",
        42,
        "not a = = conninfo '",
        # issue 43 item 13: past the size bound, more hosts than the bound
        "host=/nonexistent dbname=" + "hunter2" * 1_000,
        "host=a,b,c,d,e dbname=hunter2",
        "hostaddr=10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5 dbname=hunter2",
        "postgresql://me@a,b,c,d,e/hunter2",
    ],
)
def test_a_database_option_with_a_password_or_unusable_is_refused_naming_the_field(value: Any):
    with pytest.raises(InvalidParams) as caught:
        check_database(value)
    assert caught.value.field == "database"
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://me@/db?host=/tmp/socket",
        "host=db.example dbname=history user=me sslmode=require",
        "dbname='my history' options='-c search_path=chat'",
        "service=team",
        "host=a,b,c,d dbname=history target_session_attrs=read-write",
        # values as long as the bound, read in linear time (a scheme-like run, colons)
        "host=/tmp dbname=" + "x" * (4_096 - len("host=/tmp dbname=")),
        "host=/tmp dbname='p://" + ":" * 4_000 + "'",
    ],
)
def test_a_database_option_without_a_password_is_kept_as_given(value: str):
    assert check_database(value) == value


def test_the_database_comes_from_the_option_else_the_environment():
    env = {"CHAT_HISTORY_DATABASE_URL": "postgresql://me@db/h"}
    assert database_option(EngineOptions(), env) == "postgresql://me@db/h"
    assert database_option(EngineOptions(database="dbname=x"), env) == "dbname=x"
    assert database_option(EngineOptions(), {}) is None
    with pytest.raises(InvalidParams) as caught:
        database_option(EngineOptions(), {"CHAT_HISTORY_DATABASE_URL": "postgresql://me:pw@db/h"})
    assert caught.value.field == "CHAT_HISTORY_DATABASE_URL"


def test_text_with_nul_and_the_escape_character_round_trips(pg_database: Any, pg_managers: Any):
    _, url = pg_database
    manager = pg_managers(url)
    key = Key("w\x00s", "c\ufffe0")
    texts = ["a\x00b", "x\ufffe0y", "\ufffe", "\x00", "plain", "\ufffe\ufffe\x00"]
    history.append(manager, key, [U(text) for text in texts])
    assert [row.content for row in history.get(manager, key).messages] == texts
    assert found(manager, "a\x00b") == ["a\x00b"]
    assert [
        c.conversation_id
        for c in conversations.list_page(manager, "w\x00s", None, None).conversations
    ] == ["c\ufffe0"]


def test_calibration_ratios_keep_the_newest_keys_on_postgres(pg_database: Any, pg_managers: Any):
    from chat_history.store.calibration import MAX_KEYS

    _, url = pg_database
    manager = pg_managers(url)
    for n in range(MAX_KEYS + 2):
        usage.report(manager, "openai", f"model-{n}", 100, 150)
    assert usage.report(manager, "openai", None, 100, 120).samples == 1
    assert usage.report(manager, "openai", f"model-{MAX_KEYS + 1}", 100, 150).samples == 2
    with psycopg.connect(url) as sql:
        kept = sql.execute("SELECT count(DISTINCT model) FROM calibration_samples").fetchone()
    assert kept == (MAX_KEYS - 1,)  # the NULL model is a key of its own, not counted here


def test_the_dialect_names_each_statement_it_rewrites_and_keeps_its_rewrite_after_an_edit():
    from chat_history.store import edits, queries
    from chat_history.store.postgres import dialect

    named = {**dialect.BY_NAME, **{name: None for name in dialect.AFTER_NAMED}}
    for name in named:
        assert dialect.statement(name), name  # a name the shared SQL no longer has fails here
    assert dialect._translate(queries._INSERT_MESSAGE).endswith("RETURNING id")
    assert dialect._translate(edits.ID_BEFORE_COPY) == "SELECT nextval('message_ids') - 1"
    assert dialect._translate(queries._RAISE_ID_FLOOR) == "SELECT 1"
    with pytest.raises(AttributeError):
        dialect.statement("queries.NO_SUCH_STATEMENT")
