"""docs/acp.md's editor settings, run as an editor runs them: each snippet's command and its
arguments up to the agent (``acp``, ``--``), with the test agent after them, under a fresh home
(the default store), driven by the official SDK's client. A snippet that names another command,
or arguments the proxy does not take, fails here before a user meets it."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from tests.e2e.acp_peers.client import AGENT, editor_session

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "acp.md").read_text(encoding="utf-8")


def _snippets() -> list[tuple[str, str, list[str]]]:
    """Every (editor, command, args) the document shows: its JSON ``agent_servers`` blocks and
    its Lua block."""
    found: list[tuple[str, str, list[str]]] = []
    for block in re.findall(r"```json\n(.*?)```", DOC, re.S):
        servers: dict[str, Any] = json.loads(block).get("agent_servers", {})
        found.extend((name, s["command"], s["args"]) for name, s in servers.items())
    for block in re.findall(r"```lua\n(.*?)```", DOC, re.S):
        command = re.search(r'command = "([^"]+)"', block)
        args = re.search(r"args = \{([^}]*)\}", block)
        assert command and args, block
        found.append(("lua", command.group(1), re.findall(r'"([^"]*)"', args.group(1))))
    return found


SNIPPETS = _snippets()


def test_the_document_shows_every_editor() -> None:
    assert [name for name, _, _ in SNIPPETS] == [
        "Codex (with history)",
        "Gemini (with history)",
        "lua",
    ]


@pytest.mark.parametrize(("name", "command", "args"), SNIPPETS, ids=[s[0] for s in SNIPPETS])
async def test_a_snippet_runs_the_proxy(
    tmp_path: Path, name: str, command: str, args: list[str]
) -> None:
    assert command == "chat-history"  # the console script pip installs
    proxy = args[: args.index("--") + 1]
    assert proxy == ["acp", "--"], args
    executable = Path(sys.executable).parent / command  # the venv's own, as pip makes it
    store = tmp_path / "store"
    env = {"HOME": str(tmp_path), "CHAT_HISTORY_STORAGE": str(store)}
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with editor_session(
        tmp_path / "unused.db", env, command=[str(executable), *proxy, *AGENT]
    ) as (
        conn,
        _,
        _,
    ):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("which snippet is this?")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
        listed = await conn.list_sessions(cwd=str(cwd))
        assert [s.session_id for s in listed.sessions] == [session]
    assert (store / "chat-history.sqlite3").stat().st_size  # the default store
