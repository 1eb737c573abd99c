"""``chat-history acp`` in front of a real ACP agent run offline: Codex's ACP adapter
(``@zed-industries/codex-acp``, installed by ``make acp-agents`` into tests/acp-agents), pointed
by its config at a fake OpenAI Responses endpoint on 127.0.0.1 (acp_peers/codex.py). Codex keeps
its own history (``loadSession``, ``list``, ``resume``, ``close``) but has no ``delete`` or
``fork``: the proxy forwards the first and serves the second from the store, and answers
``session/list`` from the store (Codex's own list only when the request asks for it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from tests.e2e.acp_peers.client import editor_session
from tests.e2e.acp_peers.codex import CODEX, ENV, FakeResponses
from tests.e2e.acp_peers.codex import codex_home as fake_codex_home
from tests.e2e.test_acp_life import key_of

from chat_history.service import conversations, history
from chat_history.service.manager import ChatHistoryManager


@pytest.fixture
def codex_home(tmp_path: Path) -> Iterator[Path]:
    assert CODEX.exists(), "run `make tests/acp-agents/node_modules/.installed` (npm ci)"
    with fake_codex_home(tmp_path / "codex-home") as home:
        yield home


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for item in body.get("input", []):
        if item.get("role") == "user":
            texts += [c.get("text", "") for c in item.get("content", [])]
    return texts


async def test_codex_acp_offline_through_the_proxy(tmp_path: Path, codex_home: Path) -> None:
    db, cwd = tmp_path / "h.db", tmp_path / "project"
    cwd.mkdir()
    env = {"CODEX_HOME": str(codex_home), **ENV}
    async with editor_session(db, env, [str(CODEX)]) as (conn, editor, _):
        session = (await asyncio.wait_for(conn.new_session(cwd=str(cwd)), 60)).session_id
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("say hello")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
        said = "".join(
            u["content"]["text"]
            for u in editor.take()
            if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert "Hello from the fake model (1)" in said
        assert "say hello" in user_texts(FakeResponses.bodies[0])

        listed = await asyncio.wait_for(conn.list_sessions(cwd=str(cwd)), 30)
        assert session in {s.session_id for s in listed.sessions}
        # answered from the store, though Codex lists sessions itself: the history view's rows
        mine = await conn._conn.send_request("session/list", {"cwd": str(cwd), "limit": 5})
        assert [(r["sessionId"], r["state"]) for r in mine["sessions"]] == [(session, "idle")]
        # Codex's own list when asked for: forwarded, its answer as it came
        asked = {"cwd": str(cwd), "_meta": {"chatHistory": {"source": "agent"}}}
        own = await asyncio.wait_for(conn._conn.send_request("session/list", asked), 30)
        assert [r["sessionId"] for r in own["sessions"]] == [session]
        assert "state" not in own["sessions"][0]

        fork = await asyncio.wait_for(conn.fork_session(session_id=session, cwd=str(cwd)), 60)
        await asyncio.wait_for(
            conn.prompt(prompt=[text_block("and again")], session_id=fork.session_id), 60
        )
        seeded = user_texts(FakeResponses.bodies[-1])
        assert any("<earlier-conversation>" in t and "say hello" in t for t in seeded)
        assert "and again" in seeded

        await conn._conn.send_request("session/delete", {"sessionId": session})

    manager = ChatHistoryManager.open(db)
    try:
        assert conversations.info(manager, key_of(cwd, session)).message_count == 0
        rows, _ = history.whole(manager, key_of(cwd, fork.session_id))
        assert [r.role for r in rows] == ["user", "assistant", "user", "assistant"]
        assert "Hello from the fake model (1)" in rows[1].content
        assert rows[3].status == "complete"
    finally:
        manager.close()
