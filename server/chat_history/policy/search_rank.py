"""The answer of a search from its candidate rows (pure): each row checked against the query
(``policy.search``: the index only narrows), ranked most relevant first then newest, cut to the
page, and only the page's rows given a snippet and highlights."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from chat_history.policy.search import SearchQuery, fold, folded_relevance, match_row


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
    #: ``stored_fold(content)`` as stored (None: the row is ASCII, or its fold is not stored yet)
    folded: str | None = None


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
    (timestamp, then id) — with their snippets, and whether more rows matched. Rows are scored
    on their stored fold; the content itself decides (a row whose content does not match after
    all, a fold stored by another Unicode version, is left out)."""
    scored = []
    for row in rows:
        folded = row.folded if row.folded is not None else fold(row.content)
        score = folded_relevance(folded, query)
        if score is not None:
            scored.append((-score, -row.timestamp, -row.id, row))
    scored.sort(key=lambda item: item[:3])
    hits: list[SearchHit] = []
    for *_, row in scored:
        if len(hits) == limit:
            return hits, True
        matched = match_row(row.content, query)
        if matched is None:
            continue
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
    return hits, False
