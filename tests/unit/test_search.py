"""Search rules (protocol.md "Version 2" → Search): the query grammar, case- and accent-insensitive
substring matching, snippets with code-point highlights, and an FTS5 trigram expression that never
errors and never loses a row the exact matcher finds (real SQLite FTS5, in memory)."""

from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.policy.search.folding import fold, fold_with_origins, segments
from chat_history.policy.search.fts import fts_plan, fts_string
from chat_history.policy.search.query import SearchQuery, check_query, parse_query
from chat_history.policy.search.scoring import matches, relevance
from chat_history.policy.search.snippets import SNIPPET_LENGTH, SNIPPET_PIECE, match_row, snippet


def terms(query: str) -> list[tuple[str, bool]]:
    return [(term.text, term.phrase) for term in parse_query(query).terms]


# --- the query grammar ---------------------------------------------------------------------------


def test_words_split_at_any_whitespace() -> None:
    assert terms("read  file\tC++\nx") == [
        ("read", False),
        ("file", False),
        ("C++", False),
        ("x", False),
    ]


def test_a_quoted_part_keeps_its_order_and_spaces() -> None:
    assert terms('say "new  york" now') == [("say", False), ("new  york", True), ("now", False)]


def test_an_unclosed_quote_runs_to_the_end() -> None:
    assert terms('a "b c') == [("a", False), ("b c", True)]


def test_a_quote_inside_a_word_ends_the_word_and_opens_a_phrase() -> None:
    assert terms('ab"c d"e') == [("ab", False), ("c d", True), ("e", False)]


@pytest.mark.parametrize("query", ['""', '" "', '"', "   ", '"" ""', "\u0301", '"\u0301"'])
def test_a_query_with_nothing_searchable_has_no_terms_and_matches_nothing(query: str) -> None:
    parsed = parse_query(query)
    assert not parsed.searchable
    assert not matches('anything at all \u0301 "" ', parsed)
    assert match_row("anything", parsed) is None
    assert fts_plan(parsed).expression is None


def test_an_empty_quoted_part_is_ignored_among_words() -> None:
    assert terms('alpha "" beta') == [("alpha", False), ("beta", False)]


def test_a_term_repeated_after_folding_counts_once() -> None:
    assert terms("Café cafe CAFÉ") == [("Café", False)]


@pytest.mark.parametrize("query", ["", "x" * 1_001])
def test_an_empty_or_overlong_query_is_refused_naming_the_field(query: str) -> None:
    with pytest.raises(InvalidParams) as error:
        check_query(query)
    assert error.value.field == "query"


@pytest.mark.parametrize("query", ["x", " ", '"', "東" * 1_000])
def test_a_query_of_1_to_1000_code_points_is_accepted(query: str) -> None:
    assert check_query(query) == query


# --- folding and matching ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("Le Café de Paris", "cafe"),
        ("le cafe de paris", "CAFÉ"),
        ("cafe\u0301 decomposed", "café"),
        ("Straße 5", "strasse"),
        ("ﬁle ligature", "file"),
        ("ＦＵＬＬ width", "full"),
        ("Ὀδυσσεύς", "οδυσσευς"),
        ("İstanbul", "istanbul"),
        ("call read_file now", "read"),
        ("use C++ here", "c++"),
        ("我住在東京都", "東京"),
        ("東京都に住んでいます", "住んで"),
        ("한국어를 배워요", "한국"),
        ("a AND b OR NOT c", "and not"),
        ('say "hi" *now* NEAR(x) -y ^z a:b (p) back\\slash', "* NEAR( -y ^z a:b (p) \\"),
    ],
)
def test_every_word_matches_case_and_accent_insensitively(content: str, query: str) -> None:
    assert matches(content, parse_query(query))
    assert match_row(content, parse_query(query)) is not None


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("read the file", "read write"),
        ("york is new", '"new york"'),
        ("new york", '"new  york"'),
        ("か is kana", "が"),
        ("が is kana", "か"),
        ("한국", "하"),
        ("東京", "京都"),
        ("cafe", "caff"),
    ],
)
def test_a_row_missing_one_term_does_not_match(content: str, query: str) -> None:
    assert not matches(content, parse_query(query))
    assert match_row(content, parse_query(query)) is None


def test_a_phrase_matches_with_its_spaces_and_order() -> None:
    assert matches("I live in New York City", parse_query('"new york"'))
    assert matches("I live in New York City", parse_query('"york city" live'))


def test_nul_folds_to_a_stand_in_that_fts5_reads_past() -> None:
    assert fold("a\x00B") == "a\ufdd0b"
    assert fold("é\x00") == "e\ufdd0"
    assert matches("before\x00after", parse_query("after"))


def test_nul_and_the_replacement_character_fold_apart() -> None:
    """The stand-in is a noncharacter, which itself folds to U+FFFD: no text a user sends folds to
    what NUL folds to (issue 22)."""
    assert fold("\x00") != fold("\ufffd")
    assert fold("\ufdd0") == fold("\ufffd") == "\ufffd"
    assert fold("x\ufdd0\x00é") == "x\ufffd\ufdd0e"
    assert not matches("a\ufffdb", parse_query("a\x00b"))
    assert not matches("a\x00b", parse_query("a\ufffdb"))
    assert not matches("a\ufdd0b", parse_query("a\x00b"))


def test_fold_maps_every_folded_code_point_back_to_its_whole_segment() -> None:
    text = "Xe\u0301ß한"
    folded = fold_with_origins(text)
    assert folded.text == "xess한"
    assert [folded.original_span(i, i + 1) for i in range(len(folded.text))] == [
        (0, 1),
        (1, 3),
        (3, 4),
        (3, 4),
        (4, 5),
    ]


# --- snippets and highlights ---------------------------------------------------------------------


def highlighted(content: str, query: str) -> list[str]:
    found = match_row(content, parse_query(query))
    assert found is not None
    return [found.snippet[a:b] for a, b in found.highlights]


def test_a_short_row_is_its_own_snippet_with_every_occurrence_highlighted() -> None:
    found = match_row("Café, then CAFE again", parse_query("cafe"))
    assert found is not None
    assert found.snippet == "Café, then CAFE again"
    assert found.highlights == ((0, 4), (11, 15))


def test_a_highlight_covers_a_decomposed_accent_whole() -> None:
    assert highlighted("un cafe\u0301 noir", "café") == ["cafe\u0301"]


def test_a_highlight_of_a_folded_expansion_covers_the_original_letter() -> None:
    assert highlighted("die Straße hier", "strasse") == ["Straße"]


def test_overlapping_occurrences_merge_into_one_highlight() -> None:
    assert highlighted("aaaa b", "aaa") == ["aaaa"]
    assert highlighted("readme reader", "read eader") == ["read", "reader"]


def test_a_long_row_gets_a_200_code_point_window_around_the_first_match() -> None:
    content = "x" * 500 + " needle " + "y" * 500
    found = match_row(content, parse_query("needle"))
    assert found is not None
    assert len(found.snippet) == SNIPPET_LENGTH
    assert found.snippet in content
    [(start, end)] = found.highlights
    assert found.snippet[start:end] == "needle"
    assert 0 < start < SNIPPET_LENGTH // 2


def test_a_window_at_the_end_of_a_long_row_stays_full_length() -> None:
    content = "z" * 1000 + " tail"
    found = match_row(content, parse_query("tail"))
    assert found is not None
    assert found.snippet == content[-SNIPPET_LENGTH:]
    assert found.highlights == ((SNIPPET_LENGTH - 4, SNIPPET_LENGTH),)


def test_a_first_match_longer_than_the_snippet_is_highlighted_as_far_as_it_goes() -> None:
    phrase = "ab " * 150
    content = "lead " * 100 + phrase + "end"
    found = match_row(content, parse_query(f'"{phrase}"'))
    assert found is not None
    assert found.snippet == phrase[:SNIPPET_LENGTH]
    assert found.highlights == ((0, SNIPPET_LENGTH),)


def test_a_window_never_splits_a_letter_from_its_accent() -> None:
    content = "e\u0301" * 300 + " needle"
    found = match_row(content, parse_query("needle"))
    assert found is not None
    assert not unicodedata.combining(found.snippet[0])
    assert len(found.snippet) <= SNIPPET_LENGTH


def test_relevance_prefers_more_and_word_start_occurrences_in_shorter_text() -> None:
    query = parse_query("read")
    scores = {
        text: match_row(text, query).relevance  # type: ignore[union-attr]
        for text in ["read it, read it", "read it", "spread it", "read " + "x " * 2000]
    }
    assert scores["read it, read it"] > scores["read it"] > scores["spread it"]
    assert scores["read it"] > scores["read " + "x " * 2000]


# --- properties ----------------------------------------------------------------------------------

#: Characters whose whole-string folding equals the segment-wise one: ASCII, accented Latin
#: (composed and as a base + combining accent), Greek, CJK, kana with voicing, Hangul syllables.
_ALPHABET = st.sampled_from(
    list("abcABC xyz_+") + list("éÉèçÇßöÖ") + ["e\u0301", "A\u0300"] + list("σΣςάΆ")
    + list("東京都日本語") + list("かがカガ") + list("한국하")
)  # fmt: skip
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join)
_WORD = st.lists(_ALPHABET.filter(lambda c: not c.isspace()), min_size=1, max_size=4).map("".join)


def _reference_fold(text: str) -> str:
    """A naive whole-string fold, written apart from the module's segment-wise one."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    kept = "".join(
        c for c in decomposed if c in "\u3099\u309a" or unicodedata.category(c) not in ("Mn", "Me")
    )
    return unicodedata.normalize("NFC", kept)


@given(content=_TEXT, words=st.lists(_WORD, min_size=1, max_size=3))
def test_matching_agrees_with_a_naive_reference(content: str, words: list[str]) -> None:
    query = parse_query(" ".join(words))
    expected = all(_reference_fold(word) in _reference_fold(content) for word in words)
    assert matches(content, query) == expected
    found = match_row(content, query)
    assert (found is not None) == expected
    assert (found.relevance if found else None) == relevance(content, query)


@given(content=st.text(max_size=30), word=_WORD, tail=_TEXT)
def test_a_word_taken_from_the_content_always_matches(content: str, word: str, tail: str) -> None:
    assert matches(content + word + tail, parse_query(word))


_LONG_TEXT = st.lists(st.one_of(_ALPHABET, st.sampled_from(["\n", "  ", "é" * 30])), max_size=300)


@given(pieces=_LONG_TEXT, words=st.lists(_WORD, min_size=1, max_size=3))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_highlights_point_at_text_that_folds_to_a_term(pieces: list[str], words: list[str]) -> None:
    content = "".join(pieces) + " ".join(words) + "".join(reversed(pieces))
    query = parse_query(" ".join(words))
    found = match_row(content, query)
    assert found is not None
    assert len(found.snippet) <= SNIPPET_LENGTH
    assert found.snippet in content
    assert found.highlights
    previous_end = 0
    for start, end in found.highlights:
        assert previous_end <= start < end <= len(found.snippet)
        previous_end = end
        marked = fold(found.snippet[start:end])
        assert any(term.folded in marked for term in query.terms)


@given(content=_TEXT)
def test_segments_cover_the_text_in_order(content: str) -> None:
    spans = segments(content)
    assert "".join(content[a:b] for a, b in spans) == content
    assert all(a < b for a, b in spans)


# --- the FTS5 expression, in a real index --------------------------------------------------------


@pytest.fixture
def index() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE idx USING fts5(body, tokenize='trigram case_sensitive 1', content='')"
    )
    yield connection
    connection.close()


def candidates(
    connection: sqlite3.Connection, query: SearchQuery, positions: bool = True
) -> set[int] | None:
    expression = fts_plan(query, positions=positions).expression
    if expression is None:
        return None
    rows = connection.execute("SELECT rowid FROM idx WHERE idx MATCH ?", (expression,))
    return {rowid for (rowid,) in rows}


HOSTILE = ['"', "*", "NEAR(", "-", "AND", "OR", "NOT", "^", ":", "(", ")", "\\", "\x00", "\ud800"]


@pytest.mark.parametrize("query", [*HOSTILE, " ".join(HOSTILE), "".join(HOSTILE), 'a"b"c"'])
def test_operators_and_odd_characters_are_data_to_the_index(
    index: sqlite3.Connection, query: str
) -> None:
    index.execute("INSERT INTO idx(rowid, body) VALUES (1, ?)", (fold("NEAR(x) AND y"),))
    candidates(index, parse_query(query))  # raises sqlite3.OperationalError on a syntax error


def test_the_index_finds_operator_words_as_text(index: sqlite3.Connection) -> None:
    rows = {1: "x AND y", 2: "NEAR(a, b)", 3: 'say "hi" now', 4: "plain"}
    for rowid, body in rows.items():
        index.execute("INSERT INTO idx(rowid, body) VALUES (?, ?)", (rowid, fold(body)))
    assert candidates(index, parse_query("and")) == {1}
    assert candidates(index, parse_query("near(")) == {2}
    assert candidates(index, parse_query('say "hi"')) == {3}


def test_without_positions_a_term_is_looked_up_by_trigrams_that_cover_it() -> None:
    plan = fts_plan(parse_query('abcdefg "x  y" ab'), positions=False)
    assert plan.expression == '"abc" "def" "efg" "x  " "  y"'
    long = fts_plan(parse_query("x" * 5 + "abcdefghijklmnopqrstuvwxyz" * 3), positions=False)
    assert long.expression is not None
    assert long.expression.count('"') == 2 * 16


def test_terms_under_three_code_points_are_left_to_the_exact_matcher() -> None:
    plan = fts_plan(parse_query("ab 東京 read"))
    assert plan.expression == '"read"'
    assert [term.text for term in plan.unindexed] == ["ab", "東京"]
    assert fts_plan(parse_query("ab")).expression is None


def test_a_quote_cannot_reach_a_term_and_would_be_doubled_if_it_did() -> None:
    assert terms('x"y') == [("x", False), ("y", True)]
    assert fts_string('wor"ld') == '"wor""ld"'
    assert fts_string("a\ud800b") == '"a\ufffdb"'


_ANY_TEXT = st.lists(
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from(HOSTILE)),
    max_size=30,
).map("".join)


def trigram_index(positions: bool) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    detail = "full" if positions else "none"
    connection.execute(
        "CREATE VIRTUAL TABLE idx USING fts5(body, tokenize='trigram case_sensitive 1', "
        f"content='', detail={detail})"
    )
    return connection


@given(query=_ANY_TEXT, positions=st.booleans())
@settings(max_examples=300)
def test_no_query_makes_the_index_raise(query: str, positions: bool) -> None:
    connection = trigram_index(positions)
    try:
        connection.execute("INSERT INTO idx(rowid, body) VALUES (1, ?)", (fold("some text"),))
        candidates(connection, parse_query(query), positions)
    finally:
        connection.close()


@given(
    rows=st.lists(_TEXT, min_size=1, max_size=12),
    words=st.lists(_WORD, min_size=1, max_size=2),
    positions=st.booleans(),
)
def test_the_index_narrows_but_never_loses_a_row_the_matcher_finds(
    rows: list[str], words: list[str], positions: bool
) -> None:
    rows = [*rows, " ".join(words)]
    connection = trigram_index(positions)
    try:
        for rowid, body in enumerate(rows):
            connection.execute("INSERT INTO idx(rowid, body) VALUES (?, ?)", (rowid, fold(body)))
        query = parse_query(" ".join(words))
        expected = {rowid for rowid, body in enumerate(rows) if matches(body, query)}
        found = candidates(connection, query, positions)
        if found is None:
            return
        assert expected <= found
        if positions and not fts_plan(query).unindexed:
            assert found == expected
    finally:
        connection.close()


@pytest.mark.parametrize("shift", range(-8, 3))
def test_a_match_across_the_pieces_a_long_row_is_folded_in_is_found(shift: int) -> None:
    """A long row is folded a piece at a time up to its first match (issue 22): a match that
    crosses the end of a piece, or starts with letters that carry accents, is still the first."""
    lead = "e\u0301" * ((SNIPPET_PIECE + shift) // 2) + "x" * ((SNIPPET_PIECE + shift) % 2)
    content = lead + "Ne\u0301e\u0301dle and a later needle" + "é" * 5_000
    shown = snippet(content, parse_query("needle"))
    assert shown is not None
    text, highlights = shown
    assert [text[a:b] for a, b in highlights] == ["Ne\u0301e\u0301dle", "needle"]
    assert text in content
    # The shorter term that starts first wins over the longer one that starts later.
    shown = snippet(content, parse_query("later eedle"))
    assert shown is not None and shown[0][shown[1][0][0] :].startswith("e\u0301e\u0301dle")
