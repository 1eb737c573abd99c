"""``chat-history mcp --http PORT``: the recall server on the Streamable HTTP transport, off by
default, for clients that speak only HTTP (and the MCP conformance suite). Local and guarded, as
the MCP security guidance asks of a local server:

- bound to 127.0.0.1 only (PORT 0: any free port), never another interface;
- a request whose ``Host`` is not a loopback name (DNS rebinding) gets 421, one whose ``Origin``
  is present and not a loopback origin 403 — before anything else is read;
- every request needs ``Authorization: Bearer TOKEN``, a token made afresh for each run
  (``secrets``) and written to ``--token-file`` (created mode 0600) or else to stderr; 401
  otherwise, compared in constant time.

The scope is fixed at the start (``--workspace``, ``--all-workspaces`` or the working folder):
no client's roots choose it for the others. Both protocol eras are served on ``/mcp`` (the SDK
routes a request by its ``MCP-Protocol-Version``): 2025 clients get a session each (at most
``changes.MAX_SESSIONS`` at once, closed after 30 minutes idle), 2026-07-28 requests stand
alone."""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from chat_history.mcp import changes
from chat_history.mcp.server import RecallServer, announcer_of, build_server

log = logging.getLogger("chat_history.mcp")

HOST = "127.0.0.1"
PATH = "/mcp"
#: The names a request to a loopback server may use for it.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _loopback_host(value: str | None) -> bool:
    """Whether a ``Host`` header names this machine's loopback (any port)."""
    if not value:
        return False
    try:
        parts = urlsplit(f"//{value}")
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        return False
    return parts.hostname in LOOPBACK and not parts.username and not parts.path


def _loopback_origin(value: str) -> bool:
    """Whether an ``Origin`` header is a page served from this machine's loopback."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and parts.hostname in LOOPBACK
        and not parts.username
        and parts.path in ("", "/")
        and not parts.query
    )


class Guard:
    """The checks before the SDK's app: loopback ``Host`` and ``Origin``, then the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal: PlainTextResponse | None = None
        origin = headers.get("origin")
        if not _loopback_host(headers.get("host")):
            refusal = PlainTextResponse("Host must be a loopback name", status_code=421)
        elif origin is not None and not _loopback_origin(origin):
            refusal = PlainTextResponse("Origin must be a loopback origin", status_code=403)
        elif not self._authorized(headers.get("authorization")):
            refusal = PlainTextResponse(
                "this server needs its bearer token",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="chat-history"'},
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, value: str | None) -> bool:
        if value is None:
            return False
        scheme, _, credentials = value.partition(" ")
        given = f"Bearer {credentials.strip()}".encode() if scheme.lower() == "bearer" else b""
        return hmac.compare_digest(given, self._token)


def write_token(path: Path, token: str) -> None:
    """``token`` into ``path``, readable by this user only (an existing file is narrowed to
    0600 before the token is written; a symlink at ``path`` is refused)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)


def serve_http(recall: RecallServer, port: int, token_file: Path | None) -> None:
    """Serve MCP over Streamable HTTP on 127.0.0.1:``port`` until interrupted."""
    announcer = announcer_of(recall)
    server = build_server(recall, announcer)
    token = secrets.token_urlsafe(32)
    app: Any = server.streamable_http_app(
        streamable_http_path=PATH, host=HOST, max_sessions=changes.MAX_SESSIONS
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((HOST, port))
    listener.listen(2048)  # connections queue from now on: the line below is true when said
    bound = listener.getsockname()[1]
    if token_file is not None:
        write_token(token_file, token)
        where = f"the bearer token is in {token_file}"
    else:
        where = f"bearer token {token}"
    print(f"chat-history mcp: serving http://{HOST}:{bound}{PATH}; {where}", file=sys.stderr)
    sys.stderr.flush()
    config = uvicorn.Config(Guard(app, token), log_level="warning", lifespan="on")
    web = uvicorn.Server(config)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(announcer.run)
            await web.serve(sockets=[listener])
            tg.cancel_scope.cancel()

    anyio.run(run)
