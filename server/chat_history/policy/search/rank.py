"""The answer of a search from its best rows (pure): the store ranks every matching row by
``policy.search``'s relevance and hands over the best ``limit + 1``; they are ordered most
relevant first then newest, cut to the page, and only the page's rows given a snippet and
highlights (which fold only the part of the row up to its first match and the window shown)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from chat_history.policy.search.query import SearchQuery
from chat_history.policy.search.snippets import snippet


@attrs.frozen
class SearchScope:
    """Where a search looks: one workspace (None: every one) and one conversation (None: every
    one), rows of these roles only (none: nothing is found)."""

    workspace: str | None
    conversation: str | None
    roles: tuple[str, ...]


@attrs.frozen
class SearchRow:
    """A row that holds every term of a query, with its relevance (``policy.search``)."""

    workspace: str
    conversation: str
    id: int
    turn: int
    role: str
    timestamp: int
    content: str
    relevance: float


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
    """The ``limit`` best of ``rows`` — most relevant first, then newest (timestamp, then id) —
    with their snippets, and whether more rows matched (``rows`` holds the best ``limit + 1`` of
    every matching row, or all of them). A row none of whose terms occurs in its content after
    all (a fold stored by another Unicode version) is left out."""
    ordered = sorted(rows, key=lambda row: (-row.relevance, -row.timestamp, -row.id))
    hits: list[SearchHit] = []
    for row in ordered:
        if len(hits) == limit:
            return hits, True
        shown = snippet(row.content, query)
        if shown is None:
            continue
        hits.append(
            SearchHit(
                workspace=row.workspace,
                conversation=row.conversation,
                id=row.id,
                turn=row.turn,
                role=row.role,
                timestamp=row.timestamp,
                snippet=shown[0],
                highlights=shown[1],
            )
        )
    return hits, False
