"""Search on PostgreSQL: the same grammar and folding as on SQLite (``policy.search``: the query's
terms arrive folded; the stored fold is written by the shared insert and edit code), matched with
``LIKE '%term%'`` on the folded text, which the GIN trigram index answers for terms of three or
more code points (shorter ones scan the scope, as on SQLite) and which is exact by itself (the
index is only a filter; PostgreSQL rechecks). Ranking and snippets are the policy's, as on
SQLite."""

from __future__ import annotations

from typing import Any

from chat_history.policy.search import SearchQuery
from chat_history.policy.search_rank import SearchRow, SearchScope
from chat_history.store.postgres.schema import FOLDED
from chat_history.store.search_index import CANDIDATES

_COLUMNS = "m.workspace, m.conversation, m.id, m.turn, m.role, m.timestamp, m.content, m.folded"


def _pattern(term: str) -> str:
    """``%term%`` with LIKE's own characters escaped (query text is data), and what PostgreSQL
    cannot hold in text (NUL, lone surrogates) as U+FFFD, as the stored fold has it."""
    cleaned = "".join("\ufffd" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in term)
    escaped = cleaned.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def candidates(
    raw: Any, scope: SearchScope, query: SearchQuery, cap: int = CANDIDATES
) -> list[SearchRow]:
    """The newest ``cap`` rows in ``scope`` whose folded text holds every term of ``query``."""
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
    for term in query.terms:
        clauses.append(f"{FOLDED} LIKE %s")
        params.append(_pattern(term.folded))
    sql = (
        f"SELECT {_COLUMNS} FROM messages m WHERE {' AND '.join(clauses)} "
        "ORDER BY m.id DESC LIMIT %s"
    )
    rows = raw.execute(sql, [*params, cap]).fetchall()
    return [SearchRow(*row) for row in rows]
