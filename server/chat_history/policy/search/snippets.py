"""A matching row's snippet (protocol.md "Version 2" → Search): at most 200 code points of the
row's content around the first match, with ``highlights``, the ``[start, end)`` code-point
offsets of the matched text in the snippet; and ``match_row``, a row's whole match."""

from __future__ import annotations

import attrs

from chat_history.policy.search.folding import continues_segment, fold_with_origins
from chat_history.policy.search.query import SearchQuery
from chat_history.policy.search.scoring import relevance

#: The longest snippet, in code points.
SNIPPET_LENGTH = 200
#: How much of the content before the first match a snippet shows when it has to cut.
SNIPPET_LEAD = 60
#: A snippet looks for its first match folding the content this many code points at a time.
SNIPPET_PIECE = 4_096


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
    while start < end and continues_segment(text[start]):
        start += 1
    while start < end < len(text) and continues_segment(text[end]):
        end -= 1
    return start, end


def _back_segments(text: str, end: int, count: int) -> int:
    """The start of the last ``count`` segments of ``text[:end]``."""
    start = end
    for _ in range(count):
        if start == 0:
            break
        start -= 1
        while start > 0 and continues_segment(text[start]):
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
        while end < len(content) and continues_segment(content[end]):
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
