"""The full-text search index (protocol.md "Version 2" → Search), stateless SQL on a connection.

Design (tests/unit/test_fts_residue.py proved it on real files; README "Search"):

- ``messages.folded`` holds ``policy.search.folding.stored_fold(content)``: NULL where SQLite's
  built-in ``lower(content)`` already equals the fold (ASCII without NUL: most rows).
- ``search`` is a contentless FTS5 trigram index over ``coalesce(folded, lower(content))``, with
  FTS5's ``secure-delete``: a deleted entry is removed from the index pages themselves, so no
  trigram of deleted text stays in the file. ``detail=none`` (no positions): a term is looked up
  by the trigrams that cover it (``policy.search.fts.fts_plan(positions=False)``), and the rows
  found are checked exactly in SQL (``instr`` on the folded text, the rarest terms first). Measured
  against ``detail=full`` with phrase lookups: half the file, 40% less catch-up time, lookups as
  fast or faster.
- Ranking happens in the database, over every matching row: SQL computes ``policy.search``'s
  relevance figure for figure (``_score``), SQLite keeps the best ``limit + 1`` while it reads
  the matches, and only those rows are read out; their snippets fold only what they show.
- Lazy: an append does not touch the index. ``search_state.indexed_through`` is the highest row id
  the index holds (ids are never reused); a search first indexes the rows after it (at most
  ``CATCH_UP_ROWS`` per search) and scans the rest directly with the same folds, so results are
  complete either way.
- Triggers in built-in SQL keep the index right whoever writes the table (another process, a
  plain SQL UPDATE or DELETE): deleting or changing an indexed row removes exactly the text that
  was indexed for it. A row whose fold may be missing or stale (inserted without one, or its
  content changed while its fold stayed as it was) is queued in ``search_refold``, and every
  search first folds the queue (``refold``), so the scan and the index always read the right
  fold — whether the writer forgot the fold or the new text folds the same (step 7).
- A deletion of many indexed rows (``clear`` of a long conversation) switches secure-delete off for
  its transaction and rewrites the index once ('optimize'): cheaper than hundreds of secure
  deletes, and just as clean (the old pages are freed, and ``PRAGMA secure_delete`` zeroes them).
"""

from __future__ import annotations

from collections.abc import Sequence

from chat_history.policy.search.folding import (
    stored_fold,
)
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

#: Schema step 7 (issue 22): a content change that leaves ``folded`` as it was cannot tell a
#: writer that forgot the fold from one whose new text folds the same (``Café`` → ``CAFÉ``), so
#: the row is queued in ``search_refold`` instead of guessed at, and so is a row inserted without
#: the fold its text needs (a writer that knows only the table): the catch-up before every
#: search folds every queued row, so no search reads a missing or stale fold. The step queues
#: every row of the database whose fold this version could change: those written before the
#: fold existed, those the old trigger left unfolded, and those holding NUL or the new stand-in.
SCHEMA_V7 = """
CREATE TABLE search_refold (id INTEGER PRIMARY KEY);
DROP TRIGGER messages_folded_stale;
CREATE TRIGGER messages_folded_stale AFTER UPDATE OF content ON messages
WHEN new.content IS NOT old.content AND new.folded IS old.folded BEGIN
    INSERT OR IGNORE INTO search_refold VALUES (new.id);
    UPDATE messages SET folded = NULL WHERE id = new.id AND folded IS NOT NULL;
END;
CREATE TRIGGER messages_folded_missing AFTER INSERT ON messages
WHEN new.folded IS NULL AND (length(new.content) != length(CAST(new.content AS BLOB))
    OR instr(new.content, char(0)) > 0) BEGIN
    INSERT OR IGNORE INTO search_refold VALUES (new.id);
END;
INSERT INTO search_refold SELECT id FROM messages
WHERE length(content) != length(CAST(content AS BLOB)) OR instr(content, char(0)) > 0;
"""

#: Rows a search indexes before it answers (the rest of a backlog is scanned, and indexed by the
#: next searches): bounds the first search of a large database written before the index.
CATCH_UP_ROWS = 2_000
#: A deletion of at least this many indexed rows, and at least 1/BULK_SHARE of them all, rewrites
#: the index once instead of deleting securely row by row.
BULK_ROWS = 100
BULK_SHARE = 100


def indexed_through(connection: sqlite3.Connection) -> int:
    """The newest row id the search index holds (later rows wait for the next catch-up)."""
    return int(connection.execute("SELECT indexed_through FROM search_state").fetchone()[0])


def backlog(connection: sqlite3.Connection) -> bool:
    """Whether rows wait to be indexed or folded (one read, no write lock)."""
    sql = (
        "SELECT coalesce(max(id), 0) > (SELECT indexed_through FROM search_state) "
        "OR EXISTS (SELECT 1 FROM search_refold) FROM messages"
    )
    return bool(connection.execute(sql).fetchone()[0])


def refold(connection: sqlite3.Connection) -> int:
    """Fold every row queued in ``search_refold`` (inside the caller's write transaction; the
    triggers then index the new fold in place of what was indexed). Returns the rows whose fold
    changed."""
    queued = connection.execute(
        "SELECT m.id, m.content, m.folded FROM search_refold r JOIN messages m ON m.id = r.id"
    )
    changed = 0
    for row_id, content, folded in queued.fetchall():
        new = stored_fold(content)
        if new != folded:
            connection.execute("UPDATE messages SET folded = ? WHERE id = ?", (new, row_id))
            changed += 1
    connection.execute("DELETE FROM search_refold")
    return changed


def catch_up(connection: sqlite3.Connection, rows: int = CATCH_UP_ROWS) -> int:
    """Fold the queued rows (:func:`refold`), then index the next ``rows`` rows after
    ``indexed_through`` (inside the caller's write transaction). Returns the rows indexed."""
    refold(connection)
    through = indexed_through(connection)
    last = connection.execute(
        "SELECT max(id), count(*) FROM (SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT ?)",
        (through, rows),
    ).fetchone()
    if last[0] is None:
        return 0
    bound = int(last[0])
    connection.execute(
        "INSERT INTO search(rowid, body) SELECT id, coalesce(folded, lower(content)) "
        "FROM messages WHERE id > ? AND id <= ? ORDER BY id",
        (through, bound),
    )
    connection.execute("UPDATE search_state SET indexed_through = ?", (bound,))
    return int(last[1])


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
