"""The editor's side in the tests: the official SDK's ``ClientSideConnection`` driving
``chat-history acp -- <agent>`` over real pipes, in the manner of the SDK's example client. It
keeps every ``session/update`` it gets as the wire dict, and grants permissions (once ``hold``
is set, when it is). With ``listens``, it declares ``clientCapabilities.session.listChanged``
(which the SDK 0.12's models do not know, so ``initialize`` goes out as the wire dict) and keeps
each ``session/list_changed`` it gets (which its router does not know either)."""

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


async def start_proxy(
    db: Path,
    agent: list[str] | None = None,
    *,
    command: list[str] | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> asyncio.subprocess.Process:
    """A proxy process (``command``, else ``proxy_command(db, agent)``) on pipes, started in
    ``cwd`` (else the repository) with the repository importable and ``env`` added; ``options``
    go to ``asyncio.create_subprocess_exec``."""
    return await asyncio.create_subprocess_exec(
        *(command or proxy_command(db, agent)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        **options,
    )


class Editor(Client):
    """What an editor does with the agent's calls: keep updates, allow the first option."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        #: the params of each ``session/list_changed`` received
        self.changed: list[dict[str, Any]] = []
        #: when set, permissions wait for it
        self.hold: asyncio.Event | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(
            (session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True))
        )

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kw: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        if self.hold is not None:
            await self.hold.wait()
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
    listens: bool = False,
) -> AsyncIterator[tuple[ClientSideConnection, Editor, asyncio.subprocess.Process]]:
    """A proxy process (``command``, else ``proxy_command``; started in ``cwd``, else the
    repository) and the SDK's client connection to it (initialized; declaring that it takes
    ``session/list_changed`` with ``listens``)."""
    process = await start_proxy(db, agent, command=command, cwd=cwd, env=env, limit=1 << 28)
    assert process.stdin is not None and process.stdout is not None
    editor = Editor()
    conn = connect_to_agent(editor, process.stdin, process.stdout, use_unstable_protocol=True)
    routed = conn._conn._handler

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        if method == "session/list_changed" and is_notification:
            editor.changed.append(params)
            return None
        return await routed(method, params, is_notification)

    conn._conn._handler = handler
    try:
        if listens:
            initialize = {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"session": {"listChanged": {}}},
                "clientInfo": {"name": "test-editor", "version": "1"},
            }
            await asyncio.wait_for(conn._conn.send_request("initialize", initialize), 60)
        else:
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
