"""The answer of a search from its candidate rows (pure): each row checked against the query
(``policy.search``: the index only narrows), ranked most relevant first then newest, cut to the
page, and only the page's rows given a snippet and highlights."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from chat_history.policy.search import SearchQuery, match_row, relevance


@attrs.frozen
class SearchScope:
    """Where a search looks: one workspace (None: every one) and one conversation (None: every
    one), rows of these roles only (none: nothing is found)."""

    workspace: str | None
    conversation: str | None
    roles: tuple[str, ...]


@attrs.frozen
class SearchRow:
    """A row the index (or the scan of rows not yet indexed) offers for a query."""

    workspace: str
    conversation: str
    id: int
    turn: int
    role: str
    timestamp: int
    content: str


@attrs.frozen
class SearchHit:
    """One result: where the row is, and its snippet with ``[start, end)`` highlights."""

    workspace: str
    conversation: str
    id: int
    turn: int
    role: str
    timestamp: int
    snippet: str
    highlights: tuple[tuple[int, int], ...]


def rank(rows: Iterable[SearchRow], query: SearchQuery, limit: int) -> tuple[list[SearchHit], bool]:
    """The ``limit`` best rows that match ``query`` — most relevant first, then newest
    (timestamp, then id) — with their snippets, and whether more rows matched."""
    scored = []
    for row in rows:
        score = relevance(row.content, query)
        if score is not None:
            scored.append((-score, -row.timestamp, -row.id, row))
    scored.sort(key=lambda item: item[:3])
    hits = []
    for *_, row in scored[:limit]:
        matched = match_row(row.content, query)
        assert matched is not None  # relevance found every term
        hits.append(
            SearchHit(
                workspace=row.workspace,
                conversation=row.conversation,
                id=row.id,
                turn=row.turn,
                role=row.role,
                timestamp=row.timestamp,
                snippet=matched.snippet,
                highlights=matched.highlights,
            )
        )
    return hits, len(scored) > limit
