"""The full-text search index (protocol.md "Version 2" → Search), stateless SQL on a connection.

Design (tests/unit/test_fts_residue.py proved it on real files; README "Search"):

- ``messages.folded`` holds ``policy.search.stored_fold(content)``: NULL where SQLite's built-in
  ``lower(content)`` already equals the fold (ASCII without NUL: most rows).
- ``search`` is a contentless FTS5 trigram index over ``coalesce(folded, lower(content))``, with
  FTS5's ``secure-delete``: a deleted entry is removed from the index pages themselves, so no
  trigram of deleted text stays in the file. ``detail=none`` (no positions): a term is looked up
  by the trigrams that cover it (``policy.search.fts_plan(positions=False)``), and the rows found
  are checked exactly in SQL (``instr`` on the folded text, the rarest terms first). Measured
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

import functools
import heapq
from collections.abc import Sequence

from chat_history.policy.search import (
    DAMPING_LENGTHS,
    RELEVANCE_CAP,
    SAMPLE_CHARS,
    SAMPLE_ROWS,
    WORD_BREAKS,
    SearchQuery,
    filter_terms,
    fts_plan,
    rarest_first,
    scored_terms,
    stored_fold,
)
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
#: A conversation of at most this many rows is searched by reading its rows; a longer one
#: through the search index.
SCAN_CONVERSATION_ROWS = 256
#: Matches scored in one statement.
SCORE_BATCH = 500
#: A deletion of at least this many indexed rows, and at least 1/BULK_SHARE of them all, rewrites
#: the index once instead of deleting securely row by row.
BULK_ROWS = 100
BULK_SHARE = 100

_COLUMNS = "m.workspace, m.conversation, m.id, m.turn, m.role, m.timestamp, m.content"
_FOLDED = "coalesce(m.folded, lower(m.content))"


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


def _unstorable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (SQLite cannot store one: no row holds it)."""
    return not text.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _holds(terms: Sequence[str]) -> tuple[str, list[object]]:
    """SQL that a row's folded text holds every term (exact, as a substring), checked in the
    order given (SQLite stops at the first that fails)."""
    if not terms:
        return "1", []
    return " AND ".join(f"instr({_FOLDED}, ?) > 0" for _ in terms), list(terms)


def _count(needle_length: int) -> str:
    """SQL: how many times a needle (the next parameter) occurs in the folded text ``f`` of
    length ``n``, without overlap (Python's ``str.count``)."""
    return f"(n - length(replace(f, ?, ''))) / {needle_length}"


def _score(query: SearchQuery) -> tuple[str, list[object]]:
    """SQL of ``policy.search``'s relevance of a row (``folded_relevance`` on its folded text
    ``f`` of length ``n``), figure for figure: the database ranks every matching row, and only
    the best are read out."""
    parts: list[str] = []
    params: list[object] = []
    for term in scored_terms(query):
        starts = [f"(substr(f, 1, {len(term)}) = ?)"]
        starts += [_count(len(term) + 1) for _ in WORD_BREAKS]
        parts.append(f"min({RELEVANCE_CAP}, {_count(len(term))})")
        parts.append(f"min({RELEVANCE_CAP}, {' + '.join(starts)})")
        params += [term, term, *(c + term for c in WORD_BREAKS)]
    return f"CAST({' + '.join(parts)} AS REAL) / {_band('n')}", params


def _rarest_first(
    connection: sqlite3.Connection, where: str, params: Sequence[object], terms: Sequence[str]
) -> tuple[str, ...]:
    """``terms`` rarest first in the scope's newest rows (``policy.search.rarest_first``)."""
    if len(terms) <= 2:
        return tuple(terms)
    sample = connection.execute(
        f"SELECT substr({_FOLDED}, 1, ?) FROM messages m WHERE {where} ORDER BY m.id DESC LIMIT ?",
        [SAMPLE_CHARS, *params, SAMPLE_ROWS],
    ).fetchall()
    return rarest_first(terms, (text for (text,) in sample))


def _few_rows(connection: sqlite3.Connection, scope: SearchScope) -> bool:
    """Whether the scope is one conversation small enough that reading its rows (its own index
    finds them) costs less than a lookup in the search index."""
    if scope.conversation is None:
        return False
    sql = "SELECT coalesce(sum(message_count), 0) FROM conversations WHERE conversation = ?"
    params: list[object] = [scope.conversation]
    if scope.workspace is not None:
        sql += " AND workspace = ?"
        params.append(scope.workspace)
    return int(connection.execute(sql, params).fetchone()[0]) <= SCAN_CONVERSATION_ROWS


def best_rows(
    connection: sqlite3.Connection, scope: SearchScope, query: SearchQuery, count: int
) -> list[SearchRow]:
    """The ``count`` rows in ``scope`` that hold every term of ``query`` and rank best (most
    relevant, then newest: ``policy.search``), chosen among *all* such rows inside the database
    (one read transaction: the index and ``indexed_through`` must agree); only those are read
    out. Rows not yet indexed, rows of a small conversation and queries with no term of 3
    code points are scanned (the terms checked rarest first); otherwise the index narrows."""
    if not query.searchable or not scope.roles:
        return []
    if any(_unstorable(term.folded) for term in query.terms):
        return []
    where, where_params = _scope(scope)
    terms = _rarest_first(connection, where, where_params, filter_terms(query))
    every, every_params = _holds(terms)
    through = indexed_through(connection)
    band = _band("length(coalesce(m.folded, m.content))")  # length(F), without lower()
    select = f"SELECT m.id AS id, m.timestamp AS timestamp, {band} AS band FROM "
    filters = [*where_params, *every_params]
    # NOT INDEXED: the rows after the mark are found by id, never by scanning the workspace.
    recent = select + f"messages m NOT INDEXED WHERE m.id > ? AND {where} AND {every}"
    params: list[object] = [through, *filters]
    plan = fts_plan(query, positions=False)
    if plan.expression is None or _few_rows(connection, scope):
        indexed = select + f"messages m WHERE m.id <= ? AND {where} AND {every}"
        params += [through, *filters]
    else:
        indexed = select + (
            "search CROSS JOIN messages m ON m.id = search.rowid "
            f"WHERE search MATCH ? AND {where} AND {every}"
        )
        params += [plan.expression, *filters]
    # Every match, by length band (shortest first): a band's best possible relevance bounds
    # every row in it and after it, so scoring stops once the best ``count`` rows found beat it.
    matches = connection.execute(
        f"SELECT id, band FROM ({recent} UNION ALL {indexed}) "
        "ORDER BY band, timestamp DESC, id DESC",
        params,
    )
    ranked = _Best(connection, query, count)
    for row_id, row_band in matches:
        if not ranked.add(row_id, int(row_band)):
            break
    return ranked.rows()


@functools.lru_cache(maxsize=4)
def _band(length: str) -> str:
    """SQL: ``policy.search.damping`` of the folded length ``length``."""
    bands = " ".join(f"WHEN {length} < {b} THEN {i}" for i, b in enumerate(DAMPING_LENGTHS, 1))
    return f"CASE {bands} ELSE {len(DAMPING_LENGTHS) + 1} END"


class _Best:
    """The best ``count`` rows of the matches it is given in band order: each band's rows are
    scored in SQL, a batch at a time; ``add`` answers False once no row of the band can enter."""

    def __init__(self, connection: sqlite3.Connection, query: SearchQuery, count: int) -> None:
        self.connection = connection
        self.count = count
        self.score, self.score_params = _score(query)
        self.ceiling = 2 * RELEVANCE_CAP * len(scored_terms(query))
        self.best: list[tuple[float, int, int]] = []  # a min-heap of (score, timestamp, id)
        self.batch: list[int] = []
        self.band = 0

    def add(self, row_id: int, band: int) -> bool:
        # A new band may end the scoring only once ``count`` rows are at hand: until then, rows
        # of several bands are scored together (a rare word's few matches in one statement).
        if band != self.band and len(self.best) + len(self.batch) >= self.count:
            self.flush()
            if self.ceiling / band < self.best[0][0]:
                return False
        self.band = band
        self.batch.append(row_id)
        if len(self.batch) >= SCORE_BATCH:
            self.flush()
        return True

    def flush(self) -> None:
        if not self.batch:
            return
        scored = self.connection.execute(
            f"SELECT {self.score}, timestamp, id FROM (SELECT m.id AS id, m.timestamp AS "
            f"timestamp, {_FOLDED} AS f, length({_FOLDED}) AS n FROM messages m "
            f"WHERE m.id IN ({', '.join('?' * len(self.batch))}) LIMIT -1)",
            [*self.score_params, *self.batch],
        )
        for row in scored:
            entry = (float(row[0]), int(row[1]), int(row[2]))
            if len(self.best) < self.count:
                heapq.heappush(self.best, entry)
            elif entry > self.best[0]:
                heapq.heapreplace(self.best, entry)
        self.batch = []

    def rows(self) -> list[SearchRow]:
        self.flush()
        if not self.best:
            return []
        scores = {row_id: score for score, _, row_id in self.best}
        rows = self.connection.execute(
            f"SELECT {_COLUMNS} FROM messages m WHERE m.id IN ({', '.join('?' * len(scores))})",
            list(scores),
        ).fetchall()
        return [
            SearchRow(space, conversation, row_id, turn, role, at, content, scores[row_id])
            for space, conversation, row_id, turn, role, at, content in rows
        ]


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
