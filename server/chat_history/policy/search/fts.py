"""The FTS5 MATCH expression of a query (protocol.md "Version 2" → Search) for a trigram index
over folded text: a narrowing the exact matcher then decides."""

from __future__ import annotations

import attrs

from chat_history.policy.search.query import SearchQuery, SearchTerm, filter_terms

#: A trigram index can only look up terms of at least this many folded code points.
TRIGRAM = 3
#: Without positions in the index, a term is looked up by at most this many of its trigrams.
MAX_TRIGRAMS_PER_TERM = 16
#: ... and by at most this many trigrams in all.
MAX_FTS_STRINGS = 32


@attrs.frozen
class FtsPlan:
    """How to look a query up in an FTS5 ``trigram`` index over folded text.

    ``expression`` is the MATCH string (``None`` when no term can use the index: the caller
    then scans the rows in scope). ``indexed`` terms are looked up by the index; the ``unindexed``
    ones (fewer than 3 folded code points) cannot be, so the caller must filter the index's
    candidates with ``scoring.matches``/``snippets.match_row`` — which it does anyway for
    snippets, and which is the rule either way (the index only narrows).
    """

    expression: str | None
    indexed: tuple[SearchTerm, ...]
    unindexed: tuple[SearchTerm, ...]


def fts_string(text: str) -> str:
    """``text`` as one FTS5 string (a phrase of its trigrams): in double quotes, each ``"``
    doubled, so no character is read as an operator. Lone surrogates (which SQLite cannot store,
    so no row holds them) become U+FFFD, which the exact matcher then rejects."""
    safe = text
    if not text.isascii():
        safe = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return '"' + safe.replace('"', '""') + '"'


def _covering_trigrams(text: str) -> list[str]:
    """Distinct trigrams of ``text`` that together cover it: every third one, and the last one
    (at most ``MAX_TRIGRAMS_PER_TERM``, which is still a superset filter)."""
    starts = [*range(0, len(text) - TRIGRAM + 1, TRIGRAM), len(text) - TRIGRAM]
    trigrams = dict.fromkeys(text[start : start + TRIGRAM] for start in starts)
    return list(trigrams)[:MAX_TRIGRAMS_PER_TERM]


def fts_plan(query: SearchQuery, *, positions: bool = True) -> FtsPlan:
    """The MATCH expression for ``query`` over an index with ``tokenize='trigram'`` holding
    ``fold(content)``, FTS5's implicit AND between its strings.

    With ``positions`` (an index with ``detail=full``, the default) every indexable term is one
    FTS5 string — a phrase of its trigrams — so the index finds exactly the rows whose folded
    content holds every indexable term. Without (``detail=none`` or ``column``, which reject
    phrases but are smaller and faster to write) each term becomes its covering trigrams, each a
    string of its own: a superset the exact matcher narrows.
    """
    indexed = tuple(term for term in query.terms if len(term.folded) >= TRIGRAM)
    unindexed = tuple(term for term in query.terms if len(term.folded) < TRIGRAM)
    if not indexed:
        return FtsPlan(None, indexed, unindexed)
    if positions:
        parts = [term.folded for term in indexed]
    else:
        # The terms that decide a match, longest (rarest) first, and at most MAX_FTS_STRINGS
        # trigrams in all: each one more costs a read of its row list, and fewer still narrow.
        longest = [term for term in filter_terms(query) if len(term) >= TRIGRAM]
        trigrams = dict.fromkeys(t for term in longest for t in _covering_trigrams(term))
        parts = list(trigrams)[:MAX_FTS_STRINGS]
    return FtsPlan(" ".join(fts_string(part) for part in parts), indexed, unindexed)
