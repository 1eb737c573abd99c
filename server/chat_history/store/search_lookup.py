"""The search's lookup (protocol.md "Version 2" → Search): the ``count`` best rows in a scope
that hold every term of a query, ranked among all of them, as stateless SQL on a connection.
The index it reads and how it is kept is ``search_index`` (whose docstring gives the design):
ranking happens in the database, over every matching row; SQL computes ``policy.search``'s
relevance figure for figure (``_score``), SQLite keeps the best ``limit + 1`` while it reads the
matches, and only those rows are read out. A short conversation is scanned, a long one looked
up through the index; rows past the index's catch-up mark are scanned with the same folds."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence

from chat_history.policy.search.fts import fts_plan
from chat_history.policy.search.query import (
    SAMPLE_CHARS,
    SAMPLE_ROWS,
    SearchQuery,
    filter_terms,
    rarest_first,
)
from chat_history.policy.search.rank import SearchRow, SearchScope
from chat_history.policy.search.scoring import (
    DAMPING_LENGTHS,
    RELEVANCE_CAP,
    WORD_BREAKS,
    scored_terms,
)
from chat_history.store.engine import sqlite3
from chat_history.store.search_index import indexed_through

#: A conversation of at most this many rows is searched by reading its rows; a longer one
#: through the search index.
SCAN_CONVERSATION_ROWS = 256
#: Matches scored in one statement.
SCORE_BATCH = 500
_COLUMNS = "m.workspace, m.conversation, m.id, m.turn, m.role, m.timestamp, m.content"
_FOLDED = "coalesce(m.folded, lower(m.content))"


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
    """``terms`` rarest first in the scope's newest rows (``policy.search.query.rarest_first``)."""
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
    """SQL: ``policy.search.scoring.damping`` of the folded length ``length``."""
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
