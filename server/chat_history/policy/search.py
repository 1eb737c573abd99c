"""Full-text search rules (protocol.md "Version 2" → Search): the query grammar, case- and
accent-insensitive substring matching, snippets with code-point highlights, relevance, and the
FTS5 MATCH expression for a trigram index over folded text.

The spec's rules, as built here:

- Every word of the query (split at whitespace) must occur in the row's content as a substring,
  case- and accent-insensitively (``read`` finds ``read_file``; ``C++`` is a word; Chinese and
  Japanese text matches as written). A part in double quotes must occur with its words in that
  order and its spaces. An unclosed quote runs to the end of the query; a quoted part with nothing
  in it is ignored. Query text is data: nothing in it is an operator of the index's language.
  A query with nothing searchable answers no results.
- ``snippet`` is at most 200 code points of the row's content around the first match; its
  ``highlights`` are ``[start, end)`` code-point offsets of the matched text in the snippet.

Folding (:func:`fold`) works on *segments*: a code point with the combining marks (and Hangul
vowel/final jamo) that follow it. Each segment is folded on its own — NFKD, casefold, NFKD again,
nonspacing/enclosing marks dropped (except the kana voicing marks, so ``が`` stays apart from
``か``), NFC — so a match in the folded text maps back to whole segments of the original, and a
highlight never splits a letter from its accent. The index must hold ``fold(content)`` (not the
raw content), so that the index and the exact matcher agree on every character.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

import attrs

from chat_history.errors import InvalidParams

#: A query holds 1–1,000 code points.
QUERY_LENGTH = 1_000
#: The longest snippet, in code points.
SNIPPET_LENGTH = 200
#: How much of the content before the first match a snippet shows when it has to cut.
SNIPPET_LEAD = 60
#: A trigram index can only look up terms of at least this many folded code points.
TRIGRAM = 3
#: Without positions in the index, a term is looked up by at most this many of its trigrams.
MAX_TRIGRAMS_PER_TERM = 16
#: ... and by at most this many trigrams in all.
MAX_FTS_STRINGS = 32
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
#: A snippet looks for its first match folding the content this many code points at a time.
SNIPPET_PIECE = 4_096

#: FTS5 stops reading a text (and a query string) at NUL, so folding turns it into a stand-in
#: that no folded text holds otherwise: the noncharacter U+FDD0, which itself folds to U+FFFD
#: (a noncharacter is not text; read as the replacement character). NUL then matches only NUL,
#: and U+FFFD only U+FFFD or U+FDD0.
_NUL = "\x00"
_NUL_STANDIN = "\ufdd0"
_REPLACEMENT = "\ufffd"
#: Per code point folds remembered for the fast path (bounded: a hostile text holding every code
#: point must not grow it without end).
_CHAR_CACHE = 65_536
#: Combining kana voicing marks: they change the letter (か/が), so folding keeps them.
_KANA_MARKS = frozenset("\u3099\u309a")


# --- folding -------------------------------------------------------------------------------------


def _continues_segment(char: str) -> bool:
    """Whether ``char`` belongs to the segment of the code point before it."""
    code = ord(char)
    if 0x1160 <= code <= 0x11FF or 0xD7B0 <= code <= 0xD7FF:  # Hangul vowel and final jamo
        return True
    return unicodedata.category(char) in ("Mn", "Me", "Mc")


@lru_cache(maxsize=8192)
def _fold_segment(segment: str) -> str:
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", segment).casefold())
    kept = "".join(
        c for c in text if c in _KANA_MARKS or unicodedata.category(c) not in ("Mn", "Me")
    )
    folded = unicodedata.normalize("NFC", kept)
    return folded.replace(_NUL_STANDIN, _REPLACEMENT).replace(_NUL, _NUL_STANDIN)


def _fold_ascii(text: str) -> str:
    folded = text.lower()
    return folded.replace(_NUL, _NUL_STANDIN) if _NUL in folded else folded


class _CharFolds(dict[int, str]):
    """``str.translate`` table: a code point to its fold, when it is a segment of its own."""

    def __missing__(self, code: int) -> str:
        folded = _fold_segment(chr(code))
        if len(self) < _CHAR_CACHE:
            self[code] = folded
        return folded


class _Irregular(dict[int, str]):
    """``str.translate`` table: ``""`` for a code point that folds to exactly one code point and
    never continues a segment, ``"x"`` otherwise (a text mapped to ``""`` folds code point by
    code point, in place)."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        mark = "x" if _continues_segment(char) or len(_fold_segment(char)) != 1 else ""
        if len(self) < _CHAR_CACHE:
            self[code] = mark
        return mark


_CHAR_FOLDS = _CharFolds()
_IRREGULAR = _Irregular()


def _fold_in_place(text: str) -> str | None:
    """``fold(text)`` when every code point of ``text`` folds to one code point on its own (no
    combining marks, no expansions like ß → ss: most text), computed in C; else ``None``."""
    if text.translate(_IRREGULAR):
        return None
    return text.translate(_CHAR_FOLDS)


def segments(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` code-point spans of ``text``'s segments (a code point with the marks that
    follow it), in order, covering the whole text."""
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(text)):
        if not _continues_segment(text[index]):
            spans.append((start, index))
            start = index
    if text:
        spans.append((start, len(text)))
    return spans


@attrs.frozen
class Folded:
    """``text`` folded for matching, with the way back: folded code point ``i`` came from the
    original span ``[origin_start[i], origin_end[i])`` (both ``None`` when every code point maps
    to itself, as in ASCII text)."""

    original: str
    text: str
    origin_start: tuple[int, ...] | None = None
    origin_end: tuple[int, ...] | None = None

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original ``[start, end)`` span of folded ``[start, end)`` (``end > start``)."""
        if self.origin_start is None or self.origin_end is None:
            return start, end
        return self.origin_start[start], self.origin_end[end - 1]

    def folded_offset(self, original: int) -> int:
        """The first folded code point that comes from original offset ``original`` or later."""
        if self.origin_start is None:
            return original
        return bisect.bisect_left(self.origin_start, original)


def fold(text: str) -> str:
    """``text`` folded for case- and accent-insensitive matching (the module's rule). This is what
    the search index must hold for a row and what a query term is looked up as. NUL folds to
    U+FDD0 (FTS5 would stop reading the text there), U+FDD0 to U+FFFD."""
    if text.isascii():
        return _fold_ascii(text)
    in_place = _fold_in_place(text)
    if in_place is not None:
        return in_place
    return "".join(_fold_segment(text[start:end]) for start, end in segments(text))


def stored_fold(content: str) -> str | None:
    """What a row keeps beside its content for the search index: ``None`` when SQLite's built-in
    ``lower(content)`` already equals ``fold(content)`` (ASCII without NUL: most rows), otherwise
    ``fold(content)``. The index is then kept by triggers as ``coalesce(folded, lower(content))``
    — built-in SQL only, so every process and tool that writes the database keeps it right, and a
    deletion removes exactly the text that was indexed even after a Unicode update changes
    :func:`fold`."""
    if content.isascii() and _NUL not in content:
        return None
    return fold(content)


def fold_with_origins(text: str) -> Folded:
    """:func:`fold` with the mapping of every folded code point back to its original segment."""
    if text.isascii():
        return Folded(text, _fold_ascii(text))
    in_place = _fold_in_place(text)
    if in_place is not None:
        return Folded(text, in_place)
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for start, end in segments(text):
        piece = _fold_segment(text[start:end])
        parts.append(piece)
        starts.extend([start] * len(piece))
        ends.extend([end] * len(piece))
    return Folded(text, "".join(parts), tuple(starts), tuple(ends))


# --- the query -----------------------------------------------------------------------------------


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


# --- matching, snippets, relevance ---------------------------------------------------------------


@attrs.frozen
class SearchMatch:
    """How a row matched: its ``snippet`` (at most 200 code points of the content), the
    ``highlights`` in it (``[start, end)`` code points, sorted, disjoint) and a ``relevance``
    (higher first; ties go to the newer row)."""

    snippet: str
    highlights: tuple[tuple[int, int], ...]
    relevance: float


def _occurrences(haystack: str, needle: str, start: int = 0, end: int | None = None) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence of ``needle`` that lies whole in
    ``haystack[start:end]``."""
    found: list[int] = []
    index = haystack.find(needle, start, end)
    while index >= 0:
        found.append(index)
        index = haystack.find(needle, index + 1, end)
    return found


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


def scored_terms(query: SearchQuery) -> tuple[str, ...]:
    """The folded terms that make a row's relevance: the ``SCORED_TERMS`` longest, ties in query
    order (every term must still occur: :func:`filter_terms`)."""
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


def _window(length: int, first: tuple[int, int]) -> tuple[int, int]:
    """The snippet's ``[start, end)`` in the original content, around the first match."""
    if length <= SNIPPET_LENGTH:
        return 0, length
    match_start, match_end = first
    if match_end - match_start >= SNIPPET_LENGTH:
        return match_start, match_start + SNIPPET_LENGTH
    room = SNIPPET_LENGTH - (match_end - match_start)
    start = max(0, match_start - min(SNIPPET_LEAD, room))
    start = min(start, length - SNIPPET_LENGTH)
    return start, start + SNIPPET_LENGTH


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """Move the window inwards to segment boundaries, so it never splits a letter from its marks
    (it may then be shorter than 200 code points, never longer)."""
    while start < end and _continues_segment(text[start]):
        start += 1
    while start < end < len(text) and _continues_segment(text[end]):
        end -= 1
    return start, end


def _back_segments(text: str, end: int, count: int) -> int:
    """The start of the last ``count`` segments of ``text[:end]``."""
    start = end
    for _ in range(count):
        if start == 0:
            break
        start -= 1
        while start > 0 and _continues_segment(text[start]):
            start -= 1
    return start


def _first_match(content: str, terms: tuple[str, ...]) -> tuple[int, int] | None:
    """The original span of the earliest occurrence of any term (the longer one on a tie), or
    ``None`` when no term occurs. Folds the content ``SNIPPET_PIECE`` code points at a time and
    stops once no term can start earlier: the work is bounded by where the match is, not by the
    length of the row. Pieces overlap by as many segments as the longest term has code points
    less one (a folded code point comes from one segment, so a match that crosses the end of a
    piece lies whole in the next)."""
    longest = max(len(term) for term in terms)
    position = 0
    while True:
        end = min(len(content), position + SNIPPET_PIECE)
        while end < len(content) and _continues_segment(content[end]):
            end += 1
        piece = fold_with_origins(content[position:end])
        best: tuple[int, int] | None = None
        best_at = 0
        for term in terms:
            index = piece.text.find(term)
            if index >= 0:
                start, stop = piece.original_span(index, index + len(term))
                span = (position + start, position + stop)
                if best is None or (span[0], -span[1]) < (best[0], -best[1]):
                    best, best_at = span, index
        if end == len(content):
            return best
        if best is not None and best_at + longest <= len(piece.text):
            return best
        position = max(position + 1, _back_segments(content, end, longest - 1))


def snippet(content: str, query: SearchQuery) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """The snippet and highlights of a row known to match (``None`` if no term occurs after all).

    The first match is the earliest occurrence of any term (the longer one on a tie); the snippet
    is the whole content when it has at most 200 code points, else 200 code points with the first
    match about ``SNIPPET_LEAD`` in, never splitting a letter from its marks. Highlights mark every
    occurrence of every term that lies whole inside the snippet, mapped back to the original text
    and merged where they overlap; a first match longer than the snippet is marked as far as the
    snippet goes. Only the content up to the first match and the window shown are folded.
    """
    terms = tuple(dict.fromkeys(term.folded for term in query.terms))
    if not terms:
        return None
    first = _first_match(content, terms)
    if first is None:
        return None
    start, end = _snap(content, *_window(len(content), first))
    shown = fold_with_origins(content[start:end])
    inside = sorted(
        shown.original_span(index, index + len(term))
        for term in terms
        for index in _occurrences(shown.text, term)
    )
    if not inside and first[0] < end:
        inside = [(first[0] - start, min(first[1], end) - start)]
    merged: list[tuple[int, int]] = []
    for a, b in inside:
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return content[start:end], tuple(merged)


def match_row(content: str, query: SearchQuery) -> SearchMatch | None:
    """``None`` unless ``content`` holds every term; otherwise its :func:`snippet`, highlights
    and :func:`relevance`."""
    score = relevance(content, query)
    if score is None:
        return None
    shown = snippet(content, query)
    if shown is None:
        return None
    return SearchMatch(shown[0], shown[1], score)


# --- the index -----------------------------------------------------------------------------------


@attrs.frozen
class FtsPlan:
    """How to look a query up in an FTS5 ``trigram`` index over folded text.

    ``expression`` is the MATCH string (``None`` when no term can use the index: the caller
    then scans the rows in scope). ``indexed`` terms are looked up by the index; the ``unindexed``
    ones (fewer than 3 folded code points) cannot be, so the caller must filter the index's
    candidates with :func:`matches`/:func:`match_row` — which it does anyway for snippets, and
    which is the rule either way (the index only narrows).
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
