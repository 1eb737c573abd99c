"""The search index on real database files (store/search_index.py): the migration of a database
written before it, lazy catch-up in bounded steps with the rest scanned, writers that know only
the table (plain SQL without the fold), and the bulk deletion that rewrites the index once — each
leaving the index holding exactly the rows that exist, with their current text."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat_history.policy.search.folding import fold, stored_fold
from chat_history.policy.search.fts import fts_plan
from chat_history.policy.search.query import parse_query
from chat_history.policy.search.rank import SearchScope, rank
from chat_history.policy.search.scoring import folded_relevance
from chat_history.store import search_index, search_lookup
from chat_history.store.engine import sqlite3
from chat_history.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, statements

EVERYWHERE = SearchScope(None, None, ("system", "user", "assistant", "tool"))
#: A new conversation for each example of a property (hypothesis reuses the fixture's file).
EXAMPLES = itertools.count()


class Db:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("PRAGMA secure_delete = ON")

    def add(
        self, content: str, conversation: str = "c", *, fold: bool = True, workspace: str = "ws"
    ) -> int:
        cursor = self.connection.execute(
            "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, "
            "tokens, folded) VALUES (?, ?, 1, 'user', ?, 0, 1, ?)",
            (workspace, conversation, content, stored_fold(content) if fold else None),
        )
        return int(cursor.lastrowid or 0)

    def catch_up(self, rows: int = search_index.CATCH_UP_ROWS) -> int:
        self.connection.execute("BEGIN IMMEDIATE")
        indexed = search_index.catch_up(self.connection, rows)
        self.connection.execute("COMMIT")
        return indexed

    def found(self, query: str, scope: SearchScope = EVERYWHERE) -> list[int]:
        """Ids found, in id order, without catching up first."""
        parsed = parse_query(query)
        self.connection.execute("BEGIN")
        try:
            rows = search_lookup.best_rows(self.connection, scope, parsed, 201)
        finally:
            self.connection.execute("COMMIT")
        hits, _ = rank(rows, parsed, 200)
        return sorted(hit.id for hit in hits)

    def indexed(self, query: str) -> list[int]:
        """Rowids the index itself holds for ``query``."""
        expression = fts_plan(parse_query(query), positions=False).expression
        sql = "SELECT rowid FROM search WHERE search MATCH ? ORDER BY rowid"
        return [rowid for (rowid,) in self.connection.execute(sql, (expression,))]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Db]:
    database = Db(tmp_path / "search.sqlite3")
    migrate(database.connection)
    yield database
    database.connection.close()


def test_a_database_written_before_the_index_is_searched_after_migrating(tmp_path: Path) -> None:
    old = Db(tmp_path / "old.sqlite3")
    connection = old.connection
    for version in range(SCHEMA_VERSION):  # up to the step before the index
        if "VIRTUAL TABLE search" in MIGRATIONS[version]:
            break
        for statement in statements(MIGRATIONS[version]):
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {version + 1}")
    connection.execute(
        "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, tokens) "
        "VALUES ('ws', 'c', 1, 'user', 'Le CAFÉ de Paris', 0, 5), "
        "('ws', 'c', 1, 'assistant', 'call read_file', 0, 3)"
    )
    migrate(connection)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # Before any catch-up the rows are scanned (folded on the fly by the exact matcher)...
    assert old.found("read") == [2]
    # ...and the catch-up folds the rows written without a fold, so the index finds them too.
    assert old.catch_up() == 2
    assert old.connection.execute("SELECT folded FROM messages ORDER BY id").fetchall() == [
        ("le cafe de paris",),
        (None,),
    ]
    assert old.indexed("cafe") == [1]
    assert old.found("cafe") == [1]
    connection.close()


def test_catch_up_goes_in_bounded_steps_and_a_search_scans_the_rest(db: Db) -> None:
    ids = [db.add(f"note {i} about zebras") for i in range(25)]
    assert db.catch_up(rows=10) == 10
    assert db.indexed("zebras") == ids[:10]
    assert db.found("zebras") == ids  # the 15 not yet indexed are scanned
    assert db.catch_up(rows=10) == 10
    assert db.catch_up(rows=10) == 5
    assert db.catch_up(rows=10) == 0
    assert db.indexed("zebras") == ids
    assert search_index.backlog(db.connection) is False
    db.add("one more zebras")
    assert search_index.backlog(db.connection) is True


def test_scope_limits_the_rows_found(db: Db) -> None:
    first = db.add("shared text here", "a")
    second = db.add("shared text there", "b")
    db.catch_up()
    assert db.found("shared") == [first, second]
    assert db.found("shared", SearchScope("ws", "b", ("user",))) == [second]
    assert db.found("shared", SearchScope("other", None, ("user",))) == []
    assert db.found("shared", SearchScope("ws", None, ("assistant",))) == []
    assert db.found("shared", SearchScope("ws", None, ())) == []


def test_deleting_or_editing_rows_not_yet_indexed_leaves_the_index_right(db: Db) -> None:
    kept = db.add("alpha bravo")
    gone = db.add("alpha charlie")
    edited = db.add("alpha delta")
    db.connection.execute("DELETE FROM messages WHERE id = ?", (gone,))
    db.connection.execute(
        "UPDATE messages SET content = 'alpha echo', folded = NULL WHERE id = ?", (edited,)
    )
    db.catch_up()
    assert db.indexed("alpha") == [kept, edited]
    assert db.indexed("charlie") == [] and db.indexed("delta") == []
    assert db.found("echo") == [edited]


def test_a_writer_that_changes_content_without_the_fold_leaves_no_old_text(db: Db) -> None:
    row = db.add("Der Straße entlang")
    db.catch_up()
    assert db.indexed("strasse") == [row]
    db.connection.execute("UPDATE messages SET content = 'plain words' WHERE id = ?", (row,))
    assert db.connection.execute("SELECT folded FROM messages").fetchone() == (None,)
    assert db.indexed("strasse") == []
    assert db.found("strasse") == []
    assert db.found("plain") == [row]
    # The same before the row was indexed: the catch-up folds the new text.
    later = db.add("Ünïcode first")
    db.connection.execute("UPDATE messages SET content = 'Ça va' WHERE id = ?", (later,))
    db.catch_up()
    assert db.indexed("unicode") == []
    assert db.indexed('"ca va"') == [later]


def test_a_large_deletion_rewrites_the_index_once_and_leaves_exactly_the_rest(db: Db) -> None:
    others = [db.add(f"other row {i} xylophone", "other") for i in range(50)]
    doomed = [db.add(f"doomed row {i} xylophone", "c") for i in range(150)]
    db.catch_up()
    assert db.indexed("doomed") == doomed
    where, params = "workspace = ? AND conversation = ?", ("ws", "c")
    db.connection.execute("BEGIN IMMEDIATE")
    deleting = search_index.indexed_rows(db.connection, where, params)
    assert deleting == 150
    assert search_index.begin_bulk_delete(db.connection, deleting) is True
    db.connection.execute(f"DELETE FROM messages WHERE {where}", params)
    search_index.end_bulk_delete(db.connection)
    db.connection.execute("COMMIT")
    assert db.indexed("xylophone") == others
    assert db.indexed("doomed") == []
    secure = db.connection.execute("SELECT v FROM search_config WHERE k = 'secure-delete'")
    assert secure.fetchone() == (1,)


def test_a_small_deletion_deletes_securely_row_by_row(db: Db) -> None:
    rows = [db.add(f"row {i}") for i in range(150)]
    db.catch_up()
    db.connection.execute("BEGIN IMMEDIATE")
    assert search_index.indexed_rows(db.connection, "id <= ?", (rows[5],)) == 6
    assert search_index.begin_bulk_delete(db.connection, 6) is False
    assert search_index.begin_bulk_delete(db.connection, 100) is True
    db.connection.execute("ROLLBACK")


# -- issue 22 -------------------------------------------------------------------------------------


def test_a_writer_whose_new_text_folds_the_same_leaves_the_row_findable(db: Db) -> None:
    row = db.add("Café au lait")
    db.catch_up()
    # The fold written with the text is the one already there: the trigger cannot tell this from
    # a writer that forgot the fold, so the row is queued and the next catch-up folds it.
    db.connection.execute(
        "UPDATE messages SET content = 'CAFÉ AU LAIT', folded = ? WHERE id = ?",
        (stored_fold("CAFÉ AU LAIT"), row),
    )
    assert search_index.backlog(db.connection) is True
    db.catch_up()
    assert db.indexed("cafe") == [row]
    assert db.found("café") == [row]
    assert search_index.backlog(db.connection) is False
    # A writer that knows only the table: its non-ASCII text is folded before any search reads it.
    plain = db.connection.execute(
        "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, tokens) "
        "VALUES ('ws', 'c', 1, 'user', 'Crème', 0, 1)"
    ).lastrowid
    db.catch_up(rows=0)  # folds the queue, indexes nothing
    assert db.indexed("creme") == []
    assert db.found("creme") == [plain]  # scanned, with its fold


def test_the_step_to_version_7_refolds_nul_and_rows_left_unfolded(tmp_path: Path) -> None:
    old = Db(tmp_path / "v6.sqlite3")
    for version in range(6):
        for statement in statements(MIGRATIONS[version]):
            old.connection.execute(statement)
    old.connection.execute("PRAGMA user_version = 6")
    # As version 6 stored them: NUL folded to U+FFFD; a row whose fold the old trigger reset.
    nul = old.add("a\x00b")
    old.connection.execute("UPDATE messages SET folded = 'a\ufffdb' WHERE id = ?", (nul,))
    unfolded = old.add("Crème", fold=False)
    old.connection.execute(  # the catch-up of version 6, which folded only rows not yet indexed
        "INSERT INTO search(rowid, body) SELECT id, coalesce(folded, lower(content)) FROM messages"
    )
    old.connection.execute("UPDATE search_state SET indexed_through = ?", (unfolded,))
    assert old.indexed("a\ufffdb") == [nul]
    assert old.found("creme") == []
    migrate(old.connection)
    old.catch_up()
    assert old.indexed("a\ufffdb") == []
    assert old.found("a\ufffdb") == []
    assert old.found("a\x00b") == [nul]
    assert old.found("creme") == [unfolded]
    assert old.indexed("creme") == [unfolded]
    old.connection.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        st.text(alphabet=st.sampled_from(list("ab é\nÉc")), max_size=900), min_size=1, max_size=8
    ),
    query=st.sampled_from(["a", "b a", "é", "ab", "a b c", '"a b"', "\nA"]),
)
def test_the_database_ranks_by_the_relevance_of_the_policy(
    db: Db, texts: list[str], query: str
) -> None:
    conversation = f"c{next(EXAMPLES)}"
    for text in texts:
        db.add(text, conversation)
    parsed = parse_query(query)
    scope = SearchScope("ws", conversation, ("user",))
    db.connection.execute("BEGIN")
    try:
        rows = search_lookup.best_rows(db.connection, scope, parsed, 100)
    finally:
        db.connection.execute("COMMIT")
    expected = {i: folded_relevance(fold(text), parsed) for i, text in enumerate(texts, start=1)}
    found = [row.relevance for row in rows]
    assert sorted(found) == sorted(v for v in expected.values() if v is not None)
    for row in rows:
        assert row.relevance == folded_relevance(fold(row.content), parsed)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        st.lists(
            st.sampled_from(["x", "xa", "a ", " a", "éa", "\na", "ab", "x" * 70]), max_size=12
        ).map("".join),
        min_size=1,
        max_size=30,
    ),
    query=st.sampled_from(["a", "ab", "a b", "ea"]),
    count=st.integers(1, 4),
)
def test_the_best_rows_are_the_best_of_every_match_though_scoring_stops_early(
    db: Db, texts: list[str], query: str, count: int
) -> None:
    workspace = f"w{next(EXAMPLES)}"  # ids are never reused: each example its own rows
    ids = [db.add(text, workspace=workspace) for text in texts]
    db.catch_up(rows=len(ids) // 2)  # half through the index, half scanned
    parsed = parse_query(query)
    scope = SearchScope(workspace, None, ("user",))
    db.connection.execute("BEGIN")
    try:
        rows = search_lookup.best_rows(db.connection, scope, parsed, count)
    finally:
        db.connection.execute("COMMIT")
    scored = [(folded_relevance(fold(t), parsed), i) for i, t in zip(ids, texts, strict=True)]
    expected = sorted(((s, i) for s, i in scored if s is not None), reverse=True)[:count]
    assert sorted(((row.relevance, row.id) for row in rows), reverse=True) == expected


def test_a_longer_row_that_could_still_win_is_scored(db: Db) -> None:
    """Scoring goes band by band, shortest first, and stops only when a band's best possible
    relevance is below the best rows found: a longer row that ties (and is newer) is found,
    whether the index holds it or not yet."""
    short = db.add("a")  # one occurrence, at a word start: 2 / 1
    db.catch_up()
    tie = db.add("a a " + "x" * 70)  # two at word starts, 74 code points: 4 / 2, and newer
    parsed = parse_query("a")
    scope = SearchScope("ws", None, ("user",))
    db.connection.execute("BEGIN")
    try:
        top = search_lookup.best_rows(db.connection, scope, parsed, 1)
        db.connection.execute("COMMIT")
        db.catch_up()
        db.connection.execute("BEGIN")
        indexed = search_lookup.best_rows(db.connection, scope, parsed, 1)
        both = search_lookup.best_rows(db.connection, scope, parsed, 2)
    finally:
        db.connection.execute("COMMIT")
    assert [(row.id, row.relevance) for row in top] == [(tie, 2.0)]
    assert [row.id for row in indexed] == [tie]
    assert sorted(row.id for row in both) == [short, tie]
