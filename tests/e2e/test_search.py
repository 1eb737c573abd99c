"""``chatHistory/search`` over the real server process (protocol.md "Version 2" → Search): results
and their fields, scoping, roles, paging with ``hasMore``, relevance order, params refused with
-32602 naming the field, query text as data, the quality of matching on a fixed corpus (accents,
case, Chinese and Japanese substrings, phrases) with highlights on the matched text, retention
before results, and a second process's deletions seen at once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.rawclient import RpcError
from tests.e2e.reliability import KEEP_ALL, Server, assistant, start, user

from chat_history.policy.search.folding import fold

pytestmark = pytest.mark.engines


def engine_env(databases: Databases | None, folder: Path) -> dict[str, str] | None:
    """The server's environment: on PostgreSQL, the database of ``folder``."""
    if databases is None:
        return None
    return {**os.environ, "CHAT_HISTORY_DATABASE_URL": databases.url(folder)}


@pytest.fixture
def server(tmp_path: Path, databases: Databases | None) -> Iterator[Server]:
    folder = tmp_path / "store"
    server = start(folder, KEEP_ALL, env=engine_env(databases, folder))
    try:
        yield server
    finally:
        server.close()


def search(server: Server, query: str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = server.ok("chatHistory/search", {"query": query, **params})
    return result


def found(server: Server, query: str, **params: Any) -> list[str]:
    """The contents of the rows ``query`` finds, in result order (read back with ``get``)."""
    results = search(server, query, **params)["results"]
    contents = []
    for result in results:
        rows = server.get(result["conversationId"], workspace=result["workspace"])
        (row,) = [r for r in rows if r["id"] == result["id"]]
        contents.append(row["content"])
    return contents


def refused(server: Server, params: Any) -> str:
    """The field named by the -32602 answer to a search with ``params``."""
    answer = server.request("chatHistory/search", params)
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32602, answer
    field: str = answer["error"]["data"]["field"]
    return field


def marked(result: dict[str, Any]) -> list[str]:
    """The highlighted parts of a result's snippet."""
    return [result["snippet"][start:end] for start, end in result["highlights"]]


# -- results ------------------------------------------------------------------------------------


def test_a_search_answers_every_field_of_the_rows_it_finds(server: Server) -> None:
    stored = server.append(
        "c1",
        user("please call read_file on setup.py"),
        assistant("I read the file: it pins pygls"),
    )["messages"]
    server.append("c2", user("nothing to see here"))
    answer = search(server, "read")
    assert answer["hasMore"] is False
    results = answer["results"]
    assert {r["id"] for r in results} == {stored[0]["id"], stored[1]["id"]}
    by_id = {r["id"]: r for r in results}
    for row in stored:
        result = by_id[row["id"]]
        assert set(result) == {
            "workspace",
            "conversationId",
            "id",
            "turn",
            "role",
            "timestamp",
            "snippet",
            "highlights",
        }
        assert result["workspace"] == "ws"
        assert result["conversationId"] == "c1"
        assert (result["turn"], result["role"], result["timestamp"]) == (
            row["turn"],
            row["role"],
            row["timestamp"],
        )
        assert result["snippet"] == row["content"]
        assert marked(result) == ["read"]


def test_a_long_row_answers_a_snippet_of_200_code_points_around_the_match(
    server: Server,
) -> None:
    content = "é" * 500 + " the needle is here " + "ü" * 500
    server.append("c", user(content))
    (result,) = search(server, "NEEDLE")["results"]
    assert len(result["snippet"]) <= 200
    assert result["snippet"] in content
    assert marked(result) == ["needle"]


def test_every_word_must_occur_and_a_quoted_part_in_order(server: Server) -> None:
    server.append(
        "c",
        user("the quick brown fox"),
        assistant("brown quick"),
        user("a quick fox"),
    )
    assert sorted(found(server, "quick brown")) == ["brown quick", "the quick brown fox"]
    assert found(server, '"quick brown"') == ["the quick brown fox"]
    assert found(server, '"brown quick') == ["brown quick"]  # unclosed: runs to the end
    assert found(server, "quick zebra") == []


def test_most_relevant_first_then_newest(server: Server) -> None:
    server.append("c", user("deploy"), assistant("deploy deploy deploy the deploy service"))
    server.append("d", user("deploy"))
    results = search(server, "deploy")["results"]
    assert [r["conversationId"] for r in results] == ["c", "d", "c"]
    assert results[1]["id"] > results[2]["id"]  # equally relevant: the newer first


def test_limit_pages_the_results_and_has_more_says_whether_more_match(server: Server) -> None:
    server.append("c", *[user(f"match number {i}") for i in range(7)])
    server.append("c", user("no hit"))
    first = search(server, "match", limit=5)
    assert len(first["results"]) == 5 and first["hasMore"] is True
    exact = search(server, "match", limit=7)
    assert len(exact["results"]) == 7 and exact["hasMore"] is False
    default = search(server, "match")
    assert len(default["results"]) == 7 and default["hasMore"] is False


def test_the_default_limit_is_50(server: Server) -> None:
    server.append("c", *[user(f"row {i} says hello") for i in range(60)])
    answer = search(server, "hello")
    assert len(answer["results"]) == 50 and answer["hasMore"] is True
    assert len(search(server, "hello", limit=200)["results"]) == 60


# -- scope and roles ------------------------------------------------------------------------------


def test_scope_is_the_session_workspace_unless_named(server: Server) -> None:
    server.append("c1", user("shared word alpha"))
    server.append("c2", user("shared word beta"))
    server.append("c1", user("shared word gamma"), workspace="other")
    assert sorted(found(server, "shared")) == ["shared word alpha", "shared word beta"]
    assert found(server, "shared", conversationId="c2") == ["shared word beta"]
    assert found(server, "shared", workspace="other") == ["shared word gamma"]
    assert found(server, "shared", workspace="other", conversationId="c2") == []
    everywhere = search(server, "shared", allWorkspaces=True)["results"]
    assert sorted((r["workspace"], r["conversationId"]) for r in everywhere) == [
        ("other", "c1"),
        ("ws", "c1"),
        ("ws", "c2"),
    ]
    assert sorted(found(server, "shared", allWorkspaces=True, conversationId="c1")) == [
        "shared word alpha",
        "shared word gamma",
    ]
    assert found(server, "shared", allWorkspaces=False) == found(server, "shared")


def test_roles_default_to_user_and_assistant(server: Server) -> None:
    server.append(
        "c",
        {"role": "system", "content": "lookup system prompt"},
        user("lookup please"),
        assistant(
            "lookup done",
            toolCalls=[{"id": "t1", "name": "lookup", "arguments": {}}],
        ),
        {"role": "tool", "toolCallId": "t1", "name": "lookup", "content": "lookup result"},
    )
    assert sorted(found(server, "lookup")) == ["lookup done", "lookup please"]
    assert found(server, "lookup", roles=["tool"]) == ["lookup result"]
    assert sorted(found(server, "lookup", roles=["system", "tool"])) == [
        "lookup result",
        "lookup system prompt",
    ]
    assert len(found(server, "lookup", roles=["system", "user", "assistant", "tool"])) == 4
    assert found(server, "lookup", roles=[]) == []


# -- params ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x" * 1_001}, "query"),
        ({"query": 7}, "query"),
        ({"query": None}, "query"),
        ({"query": "a", "limit": 0}, "limit"),
        ({"query": "a", "limit": 201}, "limit"),
        ({"query": "a", "limit": "5"}, "limit"),
        ({"query": "a", "limit": 2.5}, "limit"),
        ({"query": "a", "limit": True}, "limit"),
        ({"query": "a", "roles": ["user", "robot"]}, "roles[1]"),
        ({"query": "a", "roles": [3]}, "roles[0]"),
        ({"query": "a", "roles": "user"}, "roles"),
        ({"query": "a", "conversationId": ""}, "conversationId"),
        ({"query": "a", "conversationId": "x" * 257}, "conversationId"),
        ({"query": "a", "workspace": 5}, "workspace"),
        ({"query": "a", "allWorkspaces": "yes"}, "allWorkspaces"),
    ],
)
def test_bad_params_are_refused_naming_the_field(
    server: Server, params: dict[str, Any], field: str
) -> None:
    assert refused(server, params) == field


def test_the_longest_query_and_the_largest_limit_are_accepted(server: Server) -> None:
    server.append("c", user("x" * 1_000))
    assert len(search(server, "x" * 1_000, limit=200)["results"]) == 1


OPERATOR_TEXTS = [
    'say "hi" now',
    "a AND b",
    "x OR y",
    "NOT this",
    "NEAR(a b, 3)",
    "pre* fix",
    "body:column",
    "^start",
    "C++ and C#",
    "{braces} [brackets] (parens)",
    "a - b + c",
    "semi;colon 'quote'",
    "nul\x00byte",
]


def test_query_text_is_data_and_finds_what_it_says(server: Server) -> None:
    server.append("c", *[user(text) for text in OPERATOR_TEXTS], user("plain words only"))
    for text in OPERATOR_TEXTS:
        phrase = '"' + text.replace('"', "") + '"' if '"' not in text else text
        assert text in found(server, text), text
        if '"' not in text:
            assert found(server, phrase) == [text], text
    for query in [
        '"',
        '""',
        '" "',
        "*",
        "(",
        ")",
        "-",
        "^",
        ":",
        "NEAR(",
        "AND",
        "\x00",
        "\ud800x",
    ]:
        answer = search(server, query)  # no error, whatever the characters
        assert isinstance(answer["results"], list)
    assert search(server, '""')["results"] == []
    assert search(server, '"   "')["results"] == []
    assert found(server, "C++") == ["C++ and C#"]
    assert sorted(found(server, "AND")) == ["C++ and C#", "a AND b"]


# -- quality on a fixed corpus --------------------------------------------------------------------

CORPUS = {
    "fr": "Le CAFÉ de la Gare sert un café crème à l'été",
    "de": "Die Straße ist naß und die STRASSE ist lang",
    "ja": "東京都に住む人は日本語の文章を読む",
    "zh": "我们在北京大学学习中文",
    "ko": "한국어 문장을 검색합니다",
    "code": "def read_file(path): return open(path).read()",
    "mixed": "Résumé of Naïve approaches to ÜBER-fast search",
    "decomposed": "Cafe\u0301 au lait",  # é as e + combining acute
}


@pytest.fixture
def corpus(server: Server) -> Server:
    for name, text in CORPUS.items():
        server.append(name, user(text))
    return server


@pytest.mark.parametrize(
    ("query", "conversations", "marks"),
    [
        ("cafe", ["decomposed", "fr"], ["CAFÉ", "café", "Cafe\u0301"]),
        ("CAFÉ", ["decomposed", "fr"], ["CAFÉ", "café", "Cafe\u0301"]),
        ("strasse", ["de"], ["Straße", "STRASSE"]),
        ("naß", ["de"], ["naß"]),
        ("東京", ["ja"], ["東京"]),
        ("日本語の", ["ja"], ["日本語の"]),
        ("京都に住", ["ja"], ["京都に住"]),
        ("北京", ["zh"], ["北京"]),
        ("学习中文", ["zh"], ["学习中文"]),
        ("문장", ["ko"], ["문장"]),
        ("read", ["code"], ["read", "read"]),
        ("READ_FILE", ["code"], ["read_file"]),
        ("resume naive uber", ["mixed"], ["Résumé", "Naïve", "ÜBER"]),
        ('"of naive"', ["mixed"], ["of Naïve"]),
        ('"naive of"', [], []),
        ("été", ["fr"], ["été"]),
        ("e", ["code", "de", "decomposed", "fr", "mixed"], None),
    ],
)
def test_matching_is_case_and_accent_insensitive_substring_search(
    corpus: Server, query: str, conversations: list[str], marks: list[str] | None
) -> None:
    results = search(corpus, query)["results"]
    assert sorted(r["conversationId"] for r in results) == conversations
    if marks is not None:
        assert sorted(m for r in results for m in marked(r)) == sorted(marks)
    for result in results:  # every highlight is text the query matched
        for text in marked(result):
            assert any(term in fold(text) for term in fold(query).replace('"', "").split())


# -- retention and other processes ----------------------------------------------------------------

OLD = 1_577_836_800_000  # 2020-01-01


def test_retention_runs_before_the_results(server: Server) -> None:
    server.append("c", user("ancient findme", timestamp=OLD), assistant("ok", timestamp=OLD))
    server.append("c", user("recent findme"))
    assert len(search(server, "findme")["results"]) == 2
    server.notify(
        "workspace/didChangeConfiguration",
        {"settings": {"chatHistory": {**KEEP_ALL, "maxAgeHours": 1}}},
    )
    assert found(server, "findme") == ["recent findme"]
    assert [r["content"] for r in server.get("c")] == ["recent findme"]
    trimmed = [n for n in server.notifications if n["method"] == "chatHistory/trimmed"]
    assert [n["params"]["reason"] for n in trimmed] == ["age"]


def test_a_deletion_in_one_process_is_never_found_by_another(
    tmp_path: Path, databases: Databases | None
) -> None:
    folder = tmp_path / "store"
    writer = start(folder, KEEP_ALL, env=engine_env(databases, folder))
    reader = start(folder, KEEP_ALL, env=engine_env(databases, folder))
    try:
        writer.append("gone", user("the shared needle one"))
        writer.append("kept", user("the shared needle two"))
        writer.append("pruned", user("old shared needle", timestamp=OLD))
        assert len(search(reader, "needle")["results"]) == 3  # indexed by the reader
        writer.ok("chatHistory/clear", {"conversationId": "gone"})
        assert sorted(found(reader, "needle")) == ["old shared needle", "the shared needle two"]
        writer.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"chatHistory": {**KEEP_ALL, "maxAgeHours": 1}}},
        )
        assert writer.get("pruned") == []
        assert found(reader, "needle") == ["the shared needle two"]
        writer.append("later", user("a later needle"))
        assert sorted(found(reader, "needle")) == ["a later needle", "the shared needle two"]
    finally:
        writer.close()
        reader.close()


def test_a_search_that_fails_changes_nothing(server: Server) -> None:
    server.append("c", user("stays here"))
    with pytest.raises(RpcError):
        server.ok("chatHistory/search", {"query": "stays", "limit": 0})
    assert [r["content"] for r in server.get("c")] == ["stays here"]
    assert found(server, "stays") == ["stays here"]


def test_an_edited_row_is_found_by_its_new_text_accent_insensitively_and_never_by_its_old(
    server: Server,
) -> None:
    (row,) = server.append("c1", user("the tarte tatin recipe"))["messages"]
    assert found(server, "tatin") == ["the tarte tatin recipe"]  # indexed before the edit
    server.ok(
        "chatHistory/editMessage",
        {"conversationId": "c1", "id": row["id"], "content": "la Crème brûlée de Mamé"},
    )
    assert found(server, "creme brulee") == ["la Crème brûlée de Mamé"]
    assert found(server, "MAME") == ["la Crème brûlée de Mamé"]
    assert found(server, "tatin") == []
