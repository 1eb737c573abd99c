"""Codex's ACP adapter run offline (``@zed-industries/codex-acp``, installed by ``make acp-agents``
into tests/acp-agents): a fake OpenAI Responses endpoint on 127.0.0.1 that streams one assistant
message per request, and the ``config.toml`` that points Codex at it. For
tests/e2e/test_acp_codex.py and bench/acp.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[3]
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


@contextmanager
def codex_home(home: Path) -> Iterator[Path]:
    """``home`` as a ``CODEX_HOME`` whose ``config.toml`` points Codex at a fake Responses
    endpoint served while the block runs (its requests' bodies in ``FakeResponses.bodies``)."""
    FakeResponses.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeResponses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "http://127.0.0.1:{server.server_address[1]}/v1"\n'
        'env_key = "FAKE_API_KEY"\nwire_api = "responses"\n',
        encoding="utf-8",
    )
    try:
        yield home
    finally:
        server.shutdown()


#: The environment Codex runs in against the fake endpoint (with ``CODEX_HOME``).
ENV = {"FAKE_API_KEY": "test", "RUST_LOG": "error"}
