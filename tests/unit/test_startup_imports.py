"""What the server's start loads before its first answers (issue 45): the front, the session and the
methods' table, without pygls and lsprotocol (loaded in the background), asyncio (it comes with
the event loop, started after the first answers), the MCP and ACP SDKs or the PostgreSQL engine
and driver. A module that pulls one of them in at import time fails here."""

from __future__ import annotations

import subprocess
import sys

NOT_AT_START = (
    "asyncio",
    "pygls",
    "lsprotocol",
    "mcp",
    "mcp_types",
    "acp",
    "psycopg",
    "chat_history.wire.lsp",
    "chat_history.store.postgres.store",  # the engine: only url.py checks the option
    "chat_history.importers",  # at the first importFrom
)


def test_the_first_answers_load_neither_pygls_nor_the_sdks_nor_the_postgres_driver() -> None:
    script = (
        "import sys\n"
        "import chat_history.__main__, chat_history.wire.server, chat_history.wire.methods\n"
        f"names = {NOT_AT_START!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in names or m in names))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2_000:]
    assert done.stdout.strip() == "[]"


def test_the_acp_proxy_relays_its_first_answers_without_the_acp_sdk() -> None:
    """``chat-history acp``: the ACP SDK's types (pydantic models) load at the first history the
    proxy replays from the store, not at its start."""
    script = (
        "import sys\n"
        "import chat_history.cli.agents, chat_history.acp.relay, chat_history.acp.recorder\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('acp', 'pydantic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2_000:]
    assert done.stdout.strip() == "[]"
