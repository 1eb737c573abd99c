"""The search query (protocol.md "Version 2" → Search): its grammar, its bounds, and the folded
terms a row must hold, in the order a scan checks them.

- Every word of the query (split at whitespace) must occur in the row's content as a substring,
  case- and accent-insensitively (``read`` finds ``read_file``; ``C++`` is a word; Chinese and
  Japanese text matches as written). A part in double quotes must occur with its words in that
  order and its spaces. An unclosed quote runs to the end of the query; a quoted part with nothing
  in it is ignored. Query text is data: nothing in it is an operator of the index's language.
  A query with nothing searchable answers no results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from chat_history.errors import InvalidParams
from chat_history.policy.search.folding import fold

#: A query holds 1–1,000 code points.
QUERY_LENGTH = 1_000


@attrs.frozen
class SearchTerm:
    """One thing a row must contain: a word, or a quoted phrase (``text`` as written, without its
    quotes) and its folded form."""

    text: str
    folded: str
    phrase: bool


@attrs.frozen
class SearchQuery:
    """A parsed query: its terms in query order, each folded form once."""

    terms: tuple[SearchTerm, ...]

    @property
    def searchable(self) -> bool:
        """False when nothing in the query can be searched for: the answer is no results."""
        return bool(self.terms)


def check_query(query: str) -> str:
    """``query`` as given, or InvalidParams ``query`` when it is empty or longer than 1,000 code
    points. (A query of only spaces or quotes is valid: it answers no results.)"""
    if not query:
        raise InvalidParams("query", "must not be empty")
    if len(query) > QUERY_LENGTH:
        raise InvalidParams("query", f"must be at most {QUERY_LENGTH} characters, got {len(query)}")
    return query


def parse_query(query: str) -> SearchQuery:
    """Split ``query`` into words (at whitespace) and double-quoted phrases (kept whole, spaces
    included). A ``"`` inside a word ends the word and opens a phrase; an unclosed quote runs to
    the end; a part that folds to nothing (``""``, ``"  "``, a lone combining mark) is ignored, and
    a term repeated (after folding) counts once."""
    terms: list[SearchTerm] = []
    seen: set[str] = set()

    def add(text: str, phrase: bool) -> None:
        folded = fold(text)
        if phrase and not folded.strip():
            return
        if folded and folded not in seen:
            seen.add(folded)
            terms.append(SearchTerm(text, folded, phrase))

    word: list[str] = []
    index = 0
    while index < len(query):
        char = query[index]
        if char == '"':
            add("".join(word), False)
            word = []
            close = query.find('"', index + 1)
            end = len(query) if close < 0 else close
            add(query[index + 1 : end], True)
            index = end + 1
            continue
        if char.isspace():
            add("".join(word), False)
            word = []
        else:
            word.append(char)
        index += 1
    add("".join(word), False)
    return SearchQuery(tuple(terms))


def filter_terms(query: SearchQuery) -> tuple[str, ...]:
    """The folded terms a row must hold, enough to decide a match: a term inside another one is
    implied by it and left out; the longest first (they are the rarest, so a scan that checks
    them in this order rejects most rows at the first)."""
    folded = sorted({term.folded for term in query.terms}, key=lambda t: (-len(t), t))
    kept: list[str] = []
    for term in folded:
        if not any(term in longer for longer in kept):
            kept.append(term)
    return tuple(kept)


#: How many of the scope's newest rows (their first SAMPLE_CHARS code points) a query of more
#: than two terms samples to check its rarest terms first (``rarest_first``).
SAMPLE_ROWS = 64
SAMPLE_CHARS = 4_096


def rarest_first(terms: Sequence[str], sample: Iterable[str]) -> tuple[str, ...]:
    """``terms`` (``filter_terms``) ordered by how few of the ``sample`` texts (the first
    ``SAMPLE_CHARS`` code points of the scope's newest ``SAMPLE_ROWS`` folded rows) hold them,
    then longest first: a scan that checks them in this order rejects most rows at the first
    term, so a query of many short words costs about one check per row, not one per word. Both
    engines order their exact checks by it."""
    texts = list(sample)
    held = {term: sum(term in text for text in texts) for term in terms}
    return tuple(sorted(terms, key=lambda term: (held[term], -len(term))))
