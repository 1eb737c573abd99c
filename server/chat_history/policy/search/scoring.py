"""A row's relevance to a query (protocol.md "Version 2" → Search): whether it holds every term,
and how well, computed the same way in SQL by the store (``store.search_lookup``)."""

from __future__ import annotations

from chat_history.policy.search.folding import fold
from chat_history.policy.search.query import SearchQuery

#: Occurrences of one term that still raise a row's relevance (and as many at a word start).
#: Small, so that a row's length bounds its relevance closely: the store scores the matches
#: shortest first and stops at the first length band whose best possible figure is beaten.
RELEVANCE_CAP = 2
#: The terms that make a row's relevance: the longest ones (every term must still occur).
SCORED_TERMS = 8
#: What starts a word, besides the start of the text.
WORD_BREAKS = (" ", "\n")
#: Folded lengths from which a row's relevance is divided by one more: 64 code points, then every
#: doubling (past the longest content, 4,000,000).
DAMPING_LENGTHS = tuple(64 << i for i in range(17))


def scored_terms(query: SearchQuery) -> tuple[str, ...]:
    """The folded terms that make a row's relevance: the ``SCORED_TERMS`` longest, ties in query
    order (every term must still occur: ``query.filter_terms``)."""
    ordered = sorted((term.folded for term in query.terms), key=len, reverse=True)
    return tuple(ordered[:SCORED_TERMS])


def damping(length: int) -> int:
    """What a row's occurrences are divided by: 1, plus one for each of ``DAMPING_LENGTHS`` its
    folded length reaches (longer rows hold more of everything)."""
    return 1 + sum(length >= bound for bound in DAMPING_LENGTHS)


def _relevance(folded: str, query: SearchQuery) -> float | None:
    """``None`` unless ``folded`` holds every term; otherwise, over :func:`scored_terms`, each
    term's occurrences (at most ``RELEVANCE_CAP``) plus its occurrences at a word start (the start
    of the text, or after a space or a line break; at most ``RELEVANCE_CAP``), divided by
    :func:`damping`. Occurrences are counted without overlap, left to right (``str.count``, SQL's
    ``replace``): the store computes the same figure in SQL (store.search_index)."""
    if any(term.folded not in folded for term in query.terms):
        return None
    total = 0
    for term in scored_terms(query):
        starts = int(folded.startswith(term)) + sum(folded.count(c + term) for c in WORD_BREAKS)
        total += min(RELEVANCE_CAP, folded.count(term)) + min(RELEVANCE_CAP, starts)
    return total / damping(len(folded))


def relevance(content: str, query: SearchQuery) -> float | None:
    """How well ``content`` matches (higher first; ties go to the newer row), or ``None`` when it
    lacks a term or nothing is searchable."""
    if not query.searchable:
        return None
    return _relevance(fold(content), query)


def folded_relevance(folded: str, query: SearchQuery) -> float | None:
    """:func:`relevance` of a row whose ``fold(content)`` is already known (the index keeps it:
    ``stored_fold``, or ``content.lower()`` where that is NULL), without folding again."""
    if not query.searchable:
        return None
    return _relevance(folded, query)


def matches(content: str, query: SearchQuery) -> bool:
    """Whether ``content`` holds every term of ``query`` (always false when nothing is
    searchable)."""
    return relevance(content, query) is not None
