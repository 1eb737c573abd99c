"""``chatHistory/search`` over the real server process, issue 22's findings: an edit whose new
text folds the same stays findable; rows copied by ``fork`` and rows of a database written before
the index are found by the first search; the most relevant row is found among any number of
matches; a search's time follows its answer (many short words, rows of a million code points);
NUL and U+FFFD stay apart."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.reliability import KEEP_ALL, Server, database_path, start, user

from chat_history.store.engine import sqlite3
from chat_history.store.schema import MIGRATIONS, statements

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    server = start(tmp_path / "store", KEEP_ALL)
    try:
        yield server
    finally:
        server.close()


def search(server: Server, query: str, **params: Any) -> list[dict[str, Any]]:
    result = server.ok("chatHistory/search", {"query": query, **params}, timeout=120)
    results: list[dict[str, Any]] = result["results"]
    return results


def snippets(server: Server, query: str, **params: Any) -> list[str]:
    return [result["snippet"] for result in search(server, query, **params)]


def append_many(server: Server, conversation: str, texts: list[str]) -> None:
    for start_at in range(0, len(texts), 500):
        server.append(conversation, *(user(text) for text in texts[start_at : start_at + 500]))


def timed(server: Server, query: str, **params: Any) -> tuple[float, list[dict[str, Any]]]:
    began = time.perf_counter()
    results = search(server, query, **params)
    return time.perf_counter() - began, results


# -- 1. an edit whose new text folds the same ----------------------------------------------------


def test_an_edit_whose_new_text_folds_the_same_stays_findable(server: Server) -> None:
    (row,) = server.append("c", user("Café au lait"))["messages"]
    assert snippets(server, "cafe") == ["Café au lait"]  # indexed before the edit
    edited = {"conversationId": "c", "id": row["id"], "content": "CAFÉ AU LAIT"}
    server.ok("chatHistory/editMessage", edited)
    for query in ["cafe", "café", "CAFÉ", "au lait"]:
        assert snippets(server, query) == ["CAFÉ AU LAIT"], query
    # And before it was ever indexed.
    (later,) = server.append("d", user("Crème brûlée"))["messages"]
    server.ok(
        "chatHistory/editMessage",
        {"conversationId": "d", "id": later["id"], "content": "CRÈME BRÛLÉE"},
    )
    assert snippets(server, "creme brulee") == ["CRÈME BRÛLÉE"]
    assert snippets(server, "cafe") == ["CAFÉ AU LAIT"]


# -- 2. no gap while the catch-up runs -----------------------------------------------------------


def test_rows_copied_by_fork_are_found_by_the_first_search(server: Server) -> None:
    append_many(server, "source", [f"Crème r{i:05d}" for i in range(2_500)])
    server.ok("chatHistory/fork", {"conversationId": "source", "newConversationId": "copy"})
    assert snippets(server, "creme r02499", conversationId="copy") == ["Crème r02499"]
    assert snippets(server, "creme r00000", conversationId="copy") == ["Crème r00000"]
    assert len(search(server, "crème r0249", limit=200)) == 20  # 10 in each


@pytest.mark.sqlite_only  # a SQLite file of schema version 4 (before its index)
def test_a_database_written_before_the_index_is_searched_whole_by_the_first_search(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    connection = sqlite3.connect(database_path(folder), isolation_level=None)
    for version in range(4):  # the schema before the index (version 4)
        for statement in statements(MIGRATIONS[version]):
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {version + 1}")
    rows = 2_500
    connection.executemany(
        "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, tokens) "
        "VALUES ('ws', 'old', ?, 'user', ?, ?, 3)",
        [(i + 1, f"Crème r{i:05d}", 1_700_000_000_000 + i) for i in range(rows)],
    )
    connection.execute(
        "INSERT INTO conversations (workspace, conversation, message_count, tokens, last_turn, "
        "turn_start_id, oldest_timestamp, last_activity, created_at) "
        f"VALUES ('ws', 'old', {rows}, {3 * rows}, {rows}, {rows}, 1700000000000, "
        "1700000002499, 1700000000000)"
    )
    connection.close()
    server = start(folder, KEEP_ALL)
    try:
        assert snippets(server, "creme r02499") == ["Crème r02499"]
        assert snippets(server, "CREME R00000") == ["Crème r00000"]
    finally:
        server.close()


# -- 3. ranked over every match ------------------------------------------------------------------


def test_the_most_relevant_row_is_first_among_any_number_of_matches(server: Server) -> None:
    best = "needle needle needle needle"
    filler = " ".join(["words around it"] * 30)
    append_many(server, "c", [best, *(f"{filler} needle {i}" for i in range(2_100))])
    results = search(server, "needle", limit=3)
    assert results[0]["snippet"] == best
    # Then newest: among equals, the later rows first.
    assert results[1]["snippet"].endswith("needle 2099")
    assert results[2]["snippet"].endswith("needle 2098")


# -- 4. time bounded by the answer ---------------------------------------------------------------


def test_many_one_character_words_cost_about_one_check_per_row(server: Server) -> None:
    alphabet = [chr(0x4E00 + i) for i in range(600)]
    rng = random.Random(4)
    texts = []
    for _ in range(2_000):
        rng.shuffle(alphabet)
        texts.append("".join(alphabet))
    append_many(server, "c", texts)
    absent = chr(0x9000)
    words = " ".join([*alphabet[:499], absent])
    assert len(words) <= 1_000
    search(server, absent)  # indexed, warm
    one, found = timed(server, absent)
    assert found == []
    many, found = timed(server, words)
    assert found == []
    # Before: every row was checked for the 499 words it holds before the one it lacks.
    assert many < 5 * one + 0.5, (many, one)
    # And the same words in one conversation (scanned through its own rows).
    many, found = timed(server, words, conversationId="c")
    assert found == [] and many < 5 * one + 0.5, (many, one)


def test_snippets_of_rows_of_a_million_code_points_fold_what_they_show(server: Server) -> None:
    body = "Éàü" * 333_333
    texts = [f"needle {i} {body}" for i in range(6)]
    for text in texts:
        server.append("long", user(text))
    server.append("short", user("needle short"))
    search(server, "short")  # indexed, warm
    short, _ = timed(server, "needle short")
    elapsed, found = timed(server, "needle")
    assert len(found) == 7
    assert all(len(r["snippet"]) <= 200 for r in found)
    # Before: every hit folded its whole row, twice (≈ 0.5 s per hit on this machine).
    assert elapsed < 10 * short + 1.5, (elapsed, short)


# -- 5. NUL is not U+FFFD ------------------------------------------------------------------------


def test_nul_and_the_replacement_character_do_not_match_each_other(server: Server) -> None:
    server.append("c", user("nul\x00here"), user("bad\ufffdhere"), user("odd\ufdd0here"))
    assert snippets(server, "\x00") == ["nul\x00here"]
    assert snippets(server, "l\x00h") == ["nul\x00here"]
    assert snippets(server, "\ufffd") == ["odd\ufdd0here", "bad\ufffdhere"]
    assert snippets(server, "ad\ufffdh") == ["bad\ufffdhere"]
    assert snippets(server, "\ufdd0") == snippets(server, "\ufffd")
