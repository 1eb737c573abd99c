"""The CLI's commands for agents: ``chat-history mcp`` (the MCP recall server on stdio, or on
local Streamable HTTP with ``--http``) and ``chat-history acp -- AGENT …`` (the recording proxy
in front of an ACP agent). Each SDK is imported only when its command runs, so the rest of the
CLI starts without it."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from chat_history.cli.common import (
    Subcommand,
    cli_database,
    database_location,
    machine_of,
    open_manager,
    reading,
)
from chat_history.paths import STORAGE_ENV
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import named_workspace
from chat_history.settings import default_settings
from chat_history.store import DATABASE_FILE

#: The first bytes of every SQLite database file (its header's magic string).
SQLITE_MAGIC = b"SQLite format 3\x00"


def max_tokens(text: str) -> int:
    """``--max-tokens``: a whole number within the MCP tools' bounds."""
    from chat_history.mcp.tools import MAX_MAX_TOKENS, MIN_MAX_TOKENS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not MIN_MAX_TOKENS <= value <= MAX_MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"must be from {MIN_MAX_TOKENS} to {MAX_MAX_TOKENS}")
    return value


def http_port(text: str) -> int:
    """``--http``: a TCP port (0: any free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a port number") from None
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError("must be from 0 to 65535")
    return value


def check_store(location: tuple[Path, str], *, given: bool) -> None:
    """``mcp``'s SQLite store before anything opens it (``location``: its folder and file name,
    ``given``: named by ``--db``). The server only reads: a store that ``--db`` names must hold a
    database (a mistyped path creates no folder or file; only the default store is made, so that
    an agent configured before the first chat still starts), and a file that is not SQLite's is
    refused before the store would make it owner-only (a refusal changes nothing). SystemExit
    with the reason otherwise."""
    path = location[0] / location[1]
    where = "--db" if given else f"${STORAGE_ENV} or the default folder"
    if not path.exists():
        # The default store, or a storage folder that exists (the panel registers its own before
        # the first chat): a database is made there, as the editor's server would. A path that
        # names no folder is a mistake, and nothing is created for it.
        if not given or (location[0].is_dir() and location[1] == DATABASE_FILE):
            return
        raise SystemExit(
            f"chat-history mcp: no database at {path} (from --db): the MCP server only reads "
            "history, so it creates no folder or database; pass --db the storage folder or the "
            ".sqlite3 file that the editor's server or the CLI writes"
        )
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise SystemExit(
            f"chat-history mcp: {path} (from {where}) cannot be read: {exc.strerror}"
        ) from None
    if head != SQLITE_MAGIC:
        raise SystemExit(
            f"chat-history mcp: {path} (from {where}) is not a chat history database "
            f"({'empty' if not head else 'not a SQLite file'}); it was left as it is"
        )


def serve_mcp(args: argparse.Namespace, manager: ChatHistoryManager, machine: str) -> int:
    """``mcp``: serve the recall tools and resources over ``manager`` on stdio until the
    client closes it, or with ``--http`` on 127.0.0.1 until interrupted."""
    from chat_history.mcp.server import RecallServer, serve

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    http = args.http
    recall = RecallServer(
        manager,
        workspace=args.workspace,
        all_workspaces=args.all_workspaces,
        max_tokens=args.max_tokens,
        machine=machine,
        ask_roots=http is None,
    )
    try:
        if http is None:
            serve(recall)
        else:
            from chat_history.mcp.http import serve_http

            serve_http(recall, http, args.token_file)
    finally:
        manager.close()
    return 0


def serve_acp(args: argparse.Namespace, manager: ChatHistoryManager, machine: str) -> int:
    """``acp``: relay stdio to the agent command, recording its sessions, until the editor
    closes stdin."""
    import asyncio

    from chat_history.acp.recorder import Recorder
    from chat_history.acp.relay import serve

    argv = args.agent[1:] if args.agent[:1] == ["--"] else list(args.agent)
    if not argv:
        raise SystemExit("chat-history acp: name the agent's command after --")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    try:
        return asyncio.run(serve(argv, Recorder(manager, machine)))
    finally:
        manager.close()


def cmd_mcp(args: argparse.Namespace) -> int:
    """``mcp``: the recall server on stdio (or local HTTP), read-only (storage retention off)."""
    if args.token_file is not None and args.http is None:
        raise SystemExit("chat-history mcp: --token-file needs --http")
    if cli_database(args) is None:
        check_store(database_location(args.db), given=args.db is not None)
    manager = open_manager(args, reading(default_settings()), create=True)
    return serve_mcp(args, manager, machine_of(args))


def cmd_acp(args: argparse.Namespace) -> int:
    """``acp -- AGENT …``: the recording proxy before an ACP agent (it writes: retention on)."""
    manager = open_manager(args, create=True)
    return serve_acp(args, manager, machine_of(args))


def _mcp_arguments(p: argparse.ArgumentParser) -> None:
    from chat_history.mcp.tools import DEFAULT_MAX_TOKENS

    p.add_argument(
        "--workspace",
        metavar="URI",
        type=named_workspace,
        help="the workspace to serve (default: the client's first root, else the working folder)",
    )
    p.add_argument(
        "--all-workspaces",
        action="store_true",
        help="serve every workspace's history (an agent cannot ask for this itself)",
    )
    p.add_argument(
        "--max-tokens",
        type=max_tokens,
        default=DEFAULT_MAX_TOKENS,
        metavar="N",
        help=f"bound of each answer in estimated tokens (default {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument(
        "--http",
        type=http_port,
        metavar="PORT",
        help="serve Streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio, "
        "each request with the bearer token made for this run",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="with --http: write the bearer token to PATH (mode 0600) instead of stderr",
    )


def _acp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "agent", nargs=argparse.REMAINDER, metavar="-- AGENT [ARGS...]", help="the agent's command"
    )


MCP = Subcommand(cmd_mcp, _mcp_arguments)
ACP = Subcommand(cmd_acp, _acp_arguments)
