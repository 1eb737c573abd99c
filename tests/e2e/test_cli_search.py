"""``chat-history search``, run as a real process against a real database: the same matching,
scope and roles as ``chatHistory/search``, text with the matches marked (and no terminal control
from stored text), ``--json`` as the wire result, bad arguments exit 2, and looking never deletes
(retention stays off)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.e2e.test_cli import manager, run

from chat_history.model import Message
from chat_history.service import history
from chat_history.store import Key

OLD = 1_577_836_800_000  # 2020-01-01: past any default age rule


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TZ": "UTC", "CHAT_HISTORY_STORAGE": str(tmp_path / "default-storage")}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    m = manager(folder)
    history.append(
        m,
        Key("ws-a", "c1"),
        [
            Message(role="user", content="Wie lang ist die Straße?", timestamp=OLD),
            Message(role="assistant", content="Die STRASSE ist \x1b[31mlang\x1b[0m", timestamp=OLD),
            Message(role="user", content="and now?"),  # a newer turn: the age rule could act
        ],
    )
    history.append(m, Key("ws-b", "c2"), [Message(role="system", content="strasse rules")])
    m.close()
    return folder


def test_search_prints_each_hit_with_its_matches_marked(folder: Path, env: dict[str, str]) -> None:
    result = run(env, "search", "strasse", "--db", folder)
    assert result.returncode == 0, result.stderr
    assert "ws-a  c1  #1  turn 1  user  2020-01-01 00:00:00" in result.stdout
    assert "Wie lang ist die [[Straße]]?" in result.stdout
    assert "Die [[STRASSE]] ist \\x1b[31mlang\\x1b[0m" in result.stdout
    assert "\x1b" not in result.stdout
    assert "strasse rules" not in result.stdout  # a system row: not searched by default
    system = run(env, "search", "strasse", "--role", "system", "--db", folder)
    assert "ws-b  c2" in system.stdout and "ws-a" not in system.stdout
    assert run(env, "search", "nothing-like-it", "--db", folder).stdout.strip() == "No matches."


def test_search_json_is_the_wire_result_and_scopes_apply(folder: Path, env: dict[str, str]) -> None:
    result = run(env, "search", '"die straße"', "--workspace", "ws-a", "--json", "--db", folder)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["hasMore"] is False
    assert sorted((r["conversationId"], r["id"], r["highlights"]) for r in answer["results"]) == [
        ("c1", 1, [[13, 23]]),
        ("c1", 2, [[0, 11]]),
    ]
    limited = json.loads(
        run(env, "search", "strasse", "--limit", "1", "--json", "--db", folder).stdout
    )
    assert len(limited["results"]) == 1 and limited["hasMore"] is True
    other = run(
        env,
        "search",
        "strasse",
        "--workspace",
        "ws-b",
        "--role",
        "system",
        "--json",
        "--db",
        folder,
    )
    assert [r["workspace"] for r in json.loads(other.stdout)["results"]] == ["ws-b"]
    # Looking never deletes: the turn from 2020 is still there (the default age rule, 720 h,
    # would delete it if retention ran).
    shown = run(env, "show", "c1", "--json", "--db", folder)
    assert len(json.loads(shown.stdout)["messages"]) == 3


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["search", ""], "QUERY"),
        (["search", "x", "--limit", "0"], "--limit"),
        (["search", "x", "--limit", "201"], "--limit"),
        (["search", "x", "--role", "robot"], "--role"),
        (["search", "x", "--conversation", ""], "--conversation"),
    ],
)
def test_bad_search_arguments_exit_2(
    folder: Path, env: dict[str, str], args: list[str], named: str
) -> None:
    result = run(env, *args, "--db", folder)
    assert result.returncode == 2
    assert named in result.stderr
