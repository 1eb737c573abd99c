"""Search on PostgreSQL: the same grammar and folding as on SQLite (``policy.search``: the query's
terms arrive folded; the stored fold is written by the shared insert and edit code), matched with
``LIKE '%term%'`` on the folded text, which the GIN trigram index answers for terms of three or
more code points (shorter ones scan the scope, as on SQLite) and which is exact by itself (the
index is only a filter; PostgreSQL rechecks). Ranking and snippets are the policy's, as on
SQLite."""

from __future__ import annotations

import heapq
from typing import Any

from chat_history.policy.search.query import (
    SAMPLE_CHARS,
    SAMPLE_ROWS,
    SearchQuery,
    filter_terms,
    rarest_first,
)
from chat_history.policy.search.rank import SearchRow, SearchScope
from chat_history.policy.search.scoring import folded_relevance
from chat_history.store.postgres.tables import FOLDED

_COLUMNS = "m.workspace, m.conversation, m.id, m.turn, m.role, m.timestamp, m.content"


def _pattern(term: str) -> str:
    """``%term%`` with LIKE's own characters escaped (query text is data), and what PostgreSQL
    cannot hold in text (NUL, lone surrogates) as U+FFFD, as the stored fold has it."""
    cleaned = "".join("\ufffd" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in term)
    escaped = cleaned.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def best_rows(raw: Any, scope: SearchScope, query: SearchQuery, count: int) -> list[SearchRow]:
    """The ``count`` rows in ``scope`` that hold every term of ``query`` and rank best (most
    relevant, then newest: ``policy.search``), chosen among all such rows: the index finds the
    matches, their folded text is ranked here with the policy's own relevance, and only the best
    are read out whole."""
    if not query.searchable or not scope.roles:
        return []
    clauses = ["m.role = ANY(%s)"]
    params: list[Any] = [list(scope.roles)]
    if scope.workspace is not None:
        clauses.append("m.workspace = %s")
        params.append(scope.workspace)
    if scope.conversation is not None:
        clauses.append("m.conversation = %s")
        params.append(scope.conversation)
    terms = filter_terms(query)
    if len(terms) > 2:  # checked in this order (equal costs keep it): the rarest first
        sample = raw.execute(
            f"SELECT substr({FOLDED}, 1, %s) FROM messages m WHERE {' AND '.join(clauses)} "
            "ORDER BY m.id DESC LIMIT %s",
            [SAMPLE_CHARS, *params, SAMPLE_ROWS],
        )
        terms = rarest_first(terms, (text for (text,) in sample))
    for term in terms:
        clauses.append(f"{FOLDED} LIKE %s")
        params.append(_pattern(term))
    matches = raw.execute(
        f"SELECT m.id, m.timestamp, {FOLDED} FROM messages m WHERE {' AND '.join(clauses)}",
        params,
    )
    best: list[tuple[float, int, int]] = []  # a min-heap of (relevance, timestamp, id)
    for row_id, timestamp, folded in matches:
        score = folded_relevance(folded, query)
        if score is None:
            continue
        entry = (score, int(timestamp), int(row_id))
        if len(best) < count:
            heapq.heappush(best, entry)
        elif entry > best[0]:
            heapq.heapreplace(best, entry)
    if not best:
        return []
    scores = {row_id: score for score, _, row_id in best}
    rows = raw.execute(
        f"SELECT {_COLUMNS} FROM messages m WHERE m.id = ANY(%s)", [list(scores)]
    ).fetchall()
    return [
        SearchRow(space, conversation, row_id, turn, role, at, content, scores[row_id])
        for space, conversation, row_id, turn, role, at, content in rows
    ]
