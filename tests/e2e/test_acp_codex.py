"""``chat-history acp`` in front of a real ACP agent run offline: Codex's ACP adapter
(``@zed-industries/codex-acp``, installed by ``make acp-agents`` into tests/acp-agents), pointed
by its config at a fake OpenAI Responses endpoint on 127.0.0.1 served by this test. Codex keeps
its own history (``loadSession``, ``list``, ``resume``, ``close``) but has no ``delete`` or
``fork``: the proxy forwards the first and serves the second from the store."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from acp import text_block
from tests.e2e.acp_peers.client import ROOT, editor_session
from tests.e2e.test_acp_life import key_of

from chat_history.service import conversations, history
from chat_history.service.manager import ChatHistoryManager

CODEX = ROOT / "tests" / "acp-agents" / "node_modules" / ".bin" / "codex-acp"


class FakeResponses(BaseHTTPRequestHandler):
    """``POST /v1/responses``: one streamed assistant message; every request body is kept."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        FakeResponses.bodies.append(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        text = f"Hello from the fake model ({len(FakeResponses.bodies)})"
        item = {"type": "message", "role": "assistant", "id": "msg_1"}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": "resp_1"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            },
        ]
        for piece in (text[:6], text[6:]):
            events.append(
                {
                    "type": "response.output_text.delta",
                    "delta": piece,
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                }
            )
        events += [
            {"type": "response.output_item.done", "output_index": 0,
             "item": {**item, "content": [{"type": "output_text", "text": text}]}},
            {"type": "response.completed", "response": {"id": "resp_1", "usage": {
                "input_tokens": 5, "input_tokens_details": None, "output_tokens": 5,
                "output_tokens_details": None, "total_tokens": 10}}},
        ]  # fmt: skip
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()


@pytest.fixture
def codex_home(tmp_path: Path) -> Iterator[Path]:
    assert CODEX.exists(), "run `make tests/acp-agents/node_modules/.installed` (npm ci)"
    FakeResponses.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeResponses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "http://127.0.0.1:{server.server_address[1]}/v1"\n'
        'env_key = "FAKE_API_KEY"\nwire_api = "responses"\n',
        encoding="utf-8",
    )
    yield home
    server.shutdown()


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for item in body.get("input", []):
        if item.get("role") == "user":
            texts += [c.get("text", "") for c in item.get("content", [])]
    return texts


async def test_codex_acp_offline_through_the_proxy(tmp_path: Path, codex_home: Path) -> None:
    db, cwd = tmp_path / "h.db", tmp_path / "project"
    cwd.mkdir()
    env = {"CODEX_HOME": str(codex_home), "FAKE_API_KEY": "test", "RUST_LOG": "error"}
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
