"""Folding for search (protocol.md "Version 2" → Search): case- and accent-insensitive text
that maps back to the original, and what a row keeps beside its content for the index.

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
from functools import lru_cache

import attrs

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


def continues_segment(char: str) -> bool:
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
        mark = "x" if continues_segment(char) or len(_fold_segment(char)) != 1 else ""
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
        if not continues_segment(text[index]):
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
