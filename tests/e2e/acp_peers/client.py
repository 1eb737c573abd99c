"""The editor's side in the tests: the official SDK's ``ClientSideConnection`` driving
``chat-history acp -- <agent>`` over real pipes, in the manner of the SDK's example client. It
keeps every ``session/update`` it gets as the wire dict, and grants permissions."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, Client, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation

ROOT = Path(__file__).resolve().parents[3]
AGENT = [sys.executable, "-m", "tests.e2e.acp_peers.agent"]


def proxy_command(db: Path, agent: list[str] | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chat_history.cli",
        "--db",
        str(db),
        "acp",
        "--",
        *(agent or AGENT),
    ]


class Editor(Client):
    """What an editor does with the agent's calls: keep updates, allow the first option."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(
            (session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True))
        )

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kw: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    def take(self) -> list[dict[str, Any]]:
        taken = [u for _, u in self.updates]
        self.updates.clear()
        return taken


@asynccontextmanager
async def editor_session(
    db: Path,
    env: dict[str, str],
    agent: list[str] | None = None,
    command: list[str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[tuple[ClientSideConnection, Editor, asyncio.subprocess.Process]]:
    """A proxy process (``command``, else ``proxy_command``; started in ``cwd``, else the
    repository) and the SDK's client connection to it (initialized)."""
    process = await asyncio.create_subprocess_exec(
        *(command or proxy_command(db, agent)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        limit=1 << 28,
    )
    assert process.stdin is not None and process.stdout is not None
    editor = Editor()
    conn = connect_to_agent(editor, process.stdin, process.stdout, use_unstable_protocol=True)
    try:
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="test-editor", version="1"),
            ),
            60,
        )
        yield conn, editor, process
    finally:
        await conn.close()
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
