"""The full-text search index (protocol.md "Version 2" → Search), stateless SQL on a connection.

Design (tests/unit/test_fts_residue.py proved it on real files; README "Search"):

- ``messages.folded`` holds ``policy.search.stored_fold(content)``: NULL where SQLite's built-in
  ``lower(content)`` already equals the fold (ASCII without NUL: most rows).
- ``search`` is a contentless FTS5 trigram index over ``coalesce(folded, lower(content))``, with
  FTS5's ``secure-delete``: a deleted entry is removed from the index pages themselves, so no
  trigram of deleted text stays in the file. ``detail=none`` (no positions): a term is looked up
  by the trigrams that cover it (``policy.search.fts_plan(positions=False)``), and the rows found
  are checked exactly in SQL (``instr`` on the folded text) before the newest ``CANDIDATES`` are
  taken. Measured against ``detail=full`` with phrase lookups: half the file, 40% less catch-up
  time, lookups as fast or faster.
- Lazy: an append does not touch the index. ``search_state.indexed_through`` is the highest row id
  the index holds (ids are never reused); a search first indexes the rows after it (at most
  ``CATCH_UP_ROWS`` per search) and scans the rest directly, so results are complete either way.
- Triggers in built-in SQL keep the index right whoever writes the table (another process, a
  plain SQL UPDATE or DELETE): deleting or changing an indexed row removes exactly the text that
  was indexed for it. A writer that changes ``content`` without ``folded`` gets ``folded`` reset
  to NULL (the old fold would otherwise stay in the row and in the index); the next catch-up
  folds rows that are not yet indexed.
- A deletion of many indexed rows (``clear`` of a long conversation) switches secure-delete off for
  its transaction and rewrites the index once ('optimize'): cheaper than hundreds of secure
  deletes, and just as clean (the old pages are freed, and ``PRAGMA secure_delete`` zeroes them).
"""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.policy.search import SearchQuery, fts_plan, stored_fold
from chat_history.policy.search_rank import SearchRow, SearchScope
from chat_history.store.engine import sqlite3

#: Schema step 5 (the index and its triggers; statements end with ``;`` at line end, trigger
#: bodies included: split them with ``sqlite3.complete_statement``).
SCHEMA = """
ALTER TABLE messages ADD COLUMN folded TEXT;
CREATE VIRTUAL TABLE search USING fts5(
    body, content='', detail=none, tokenize='trigram case_sensitive 1'
);
INSERT INTO search(search, rank) VALUES ('secure-delete', 1);
CREATE TABLE search_state (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    indexed_through INTEGER NOT NULL
);
INSERT INTO search_state VALUES (0, 0);
CREATE TRIGGER messages_search_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT indexed_through FROM search_state) BEGIN
    INSERT INTO search(search, rowid, body)
    VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
END;
CREATE TRIGGER messages_search_update AFTER UPDATE OF content, folded ON messages
WHEN old.id <= (SELECT indexed_through FROM search_state)
    AND NOT (new.content IS NOT old.content AND new.folded IS old.folded
             AND old.folded IS NOT NULL) BEGIN
    INSERT INTO search(search, rowid, body)
    VALUES ('delete', old.id, coalesce(old.folded, lower(old.content)));
    INSERT INTO search(rowid, body) VALUES (new.id, coalesce(new.folded, lower(new.content)));
END;
CREATE TRIGGER messages_folded_stale AFTER UPDATE OF content ON messages
WHEN new.content IS NOT old.content AND new.folded IS old.folded AND old.folded IS NOT NULL
BEGIN
    UPDATE messages SET folded = NULL WHERE id = new.id;
END;
"""

#: Rows a search indexes before it answers (the rest of a backlog is scanned, and indexed by the
#: next searches): bounds the first search of a large database written before the index.
CATCH_UP_ROWS = 2_000
#: Candidates a search ranks at most: the newest rows that hold every term.
CANDIDATES = 2_000
#: A deletion of at least this many indexed rows, and at least 1/BULK_SHARE of them all, rewrites
#: the index once instead of deleting securely row by row.
BULK_ROWS = 100
BULK_SHARE = 100

_COLUMNS = "m.workspace, m.conversation, m.id, m.turn, m.role, m.timestamp, m.content, m.folded"
_FOLDED = "coalesce(m.folded, lower(m.content))"


def indexed_through(connection: sqlite3.Connection) -> int:
    """The newest row id the search index holds (later rows wait for the next catch-up)."""
    return int(connection.execute("SELECT indexed_through FROM search_state").fetchone()[0])


def backlog(connection: sqlite3.Connection) -> bool:
    """Whether rows wait to be indexed (one read, no write lock)."""
    sql = "SELECT coalesce(max(id), 0) > (SELECT indexed_through FROM search_state) FROM messages"
    return bool(connection.execute(sql).fetchone()[0])


def catch_up(connection: sqlite3.Connection, rows: int = CATCH_UP_ROWS) -> int:
    """Index the next ``rows`` rows after ``indexed_through`` (inside the caller's write
    transaction), folding first those a writer left without their fold. Returns the rows
    indexed."""
    through = indexed_through(connection)
    last = connection.execute(
        "SELECT max(id), count(*) FROM (SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT ?)",
        (through, rows),
    ).fetchone()
    if last[0] is None:
        return 0
    bound = int(last[0])
    unfolded = connection.execute(
        "SELECT id, content FROM messages WHERE id > ? AND id <= ? AND folded IS NULL "
        "AND (length(content) != octet_length(content) OR instr(content, char(0)) > 0)",
        (through, bound),
    ).fetchall()
    connection.executemany(
        "UPDATE messages SET folded = ? WHERE id = ?",
        [(stored_fold(content), row_id) for row_id, content in unfolded],
    )
    connection.execute(
        "INSERT INTO search(rowid, body) SELECT id, coalesce(folded, lower(content)) "
        "FROM messages WHERE id > ? AND id <= ? ORDER BY id",
        (through, bound),
    )
    connection.execute("UPDATE search_state SET indexed_through = ?", (bound,))
    return int(last[1])


def _scope(scope: SearchScope) -> tuple[str, list[object]]:
    clauses = [f"m.role IN ({', '.join('?' * len(scope.roles))})"]
    params: list[object] = list(scope.roles)
    if scope.workspace is not None:
        clauses.append("m.workspace = ?")
        params.append(scope.workspace)
    if scope.conversation is not None:
        clauses.append("m.conversation = ?")
        params.append(scope.conversation)
    return " AND ".join(clauses), params


def _storable(text: str) -> str:
    """``text`` as SQLite can take it: a lone surrogate (which no stored row holds) as U+FFFD."""
    if text.isascii():
        return text
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def _holds(terms: Sequence[str]) -> tuple[str, list[object]]:
    """SQL that a row's folded text holds every term (exact, as a substring)."""
    if not terms:
        return "1", []
    return " AND ".join(f"instr({_FOLDED}, ?) > 0" for _ in terms), [_storable(t) for t in terms]


def candidates(
    connection: sqlite3.Connection, scope: SearchScope, query: SearchQuery, cap: int = CANDIDATES
) -> list[SearchRow]:
    """The newest ``cap`` rows in ``scope`` whose folded text holds every term of ``query``
    (inside one read transaction: the index and ``indexed_through`` must agree). Rows not yet
    indexed, and rows of one conversation, are scanned; otherwise the index finds them."""
    if not query.searchable or not scope.roles:
        return []
    where, where_params = _scope(scope)
    plan = fts_plan(query, positions=False)
    every, every_params = _holds([term.folded for term in query.terms])
    through = indexed_through(connection)
    # NOT INDEXED: the rows after the mark are found by id, never by scanning the workspace.
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM messages m NOT INDEXED WHERE m.id > ? AND {where} AND {every} "
        "ORDER BY m.id DESC LIMIT ?",
        [through, *where_params, *every_params, cap],
    ).fetchall()
    if len(rows) < cap:
        if plan.expression is None or scope.conversation is not None:
            # One conversation: its rows by the conversation index; else newest first by id,
            # stopping at ``cap`` (never every row of a workspace, then sorted).
            hint = "" if scope.conversation is not None else " NOT INDEXED"
            sql = (
                f"SELECT {_COLUMNS} FROM messages m{hint} WHERE m.id <= ? AND {where} AND {every} "
                "ORDER BY m.id DESC LIMIT ?"
            )
            params = [through, *where_params, *every_params, cap - len(rows)]
        else:
            sql = (
                f"SELECT {_COLUMNS} FROM search CROSS JOIN messages m ON m.id = search.rowid "
                f"WHERE search MATCH ? AND {where} AND {every} ORDER BY search.rowid DESC LIMIT ?"
            )
            params = [plan.expression, *where_params, *every_params, cap - len(rows)]
        rows.extend(connection.execute(sql, params).fetchall())
    return [SearchRow(*row) for row in rows]


def indexed_rows(connection: sqlite3.Connection, where: str, params: Sequence[object]) -> int:
    """How many rows of ``SELECT ... FROM messages WHERE <where>`` the index holds."""
    sql = f"SELECT count(*) FROM messages WHERE id <= ? AND ({where})"
    return int(connection.execute(sql, [indexed_through(connection), *params]).fetchone()[0])


def begin_bulk_delete(connection: sqlite3.Connection, deleting: int) -> bool:
    """Before a delete of ``deleting`` indexed rows in the caller's write transaction: when that
    many secure deletes would cost more than rewriting the index once, switch FTS5's
    secure-delete off for the transaction and return True; the caller then calls
    ``end_bulk_delete`` after the delete."""
    if deleting < BULK_ROWS:
        return False
    total = connection.execute(
        "SELECT count(*) FROM messages WHERE id <= (SELECT indexed_through FROM search_state)"
    ).fetchone()[0]
    if deleting * BULK_SHARE < int(total):
        return False
    connection.execute("INSERT INTO search(search, rank) VALUES ('secure-delete', 0)")
    return True


def end_bulk_delete(connection: sqlite3.Connection) -> None:
    """After a bulk delete: merge the index into one new segment (dropping the deleted entries;
    the old pages are freed and zeroed) and switch secure-delete back on."""
    connection.execute("INSERT INTO search(search) VALUES ('optimize')")
    connection.execute("INSERT INTO search(search, rank) VALUES ('secure-delete', 1)")
