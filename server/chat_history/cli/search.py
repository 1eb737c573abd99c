"""``search``: the full-text search of ``chatHistory/search`` from the command line, checked by the
wire's own checks and its refusals named by their flags."""

from __future__ import annotations

import argparse

from chat_history.cli.common import (
    EXIT_USAGE,
    CliError,
    Subcommand,
    open_manager,
    print_json,
    reading,
)
from chat_history.cli.render import search_text
from chat_history.errors import InvalidParams
from chat_history.model import ROLES
from chat_history.service import search as service_search
from chat_history.service.workspaces import named_workspace
from chat_history.settings import default_settings
from chat_history.wire import checks
from chat_history.wire.methods import search


def cmd_search(args: argparse.Namespace) -> int:
    """``search``: the full-text search of ``chatHistory/search``, its refusals named by their
    flags."""
    params = search.SearchParams(
        query=args.query,
        conversation_id=args.conversation,
        workspace=args.workspace,
        all_workspaces=args.workspace is None,
        roles=args.role,
        limit=args.limit,
    )
    try:
        scope, query, limit = search.search_args(params, checks.SessionWorkspace(""))
    except InvalidParams as exc:
        flag = {"query": "QUERY", "limit": "--limit", "workspace": "--workspace"}
        name = flag.get(exc.field, "--conversation" if exc.field == "conversationId" else "--role")
        raise CliError(f"argument {name}: {exc.why}", EXIT_USAGE) from None
    result = service_search.search(
        open_manager(args, reading(default_settings())), scope, query, limit
    )
    if args.json:
        print_json(search.wire_search(result))
    else:
        print(search_text(result.hits, result.has_more))
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY", help='words to find; "quoted words" in order')
    p.add_argument(
        "--workspace", metavar="W", type=named_workspace, help="only this workspace (default: all)"
    )
    p.add_argument("--conversation", metavar="C", help="only this conversation")
    p.add_argument(
        "--role",
        action="append",
        choices=ROLES,
        help="rows of this role (repeatable; default: user and assistant)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="at most N results (1-200, default 50)")
    p.add_argument("--json", action="store_true", help="the result as chatHistory/search's")


SEARCH = Subcommand(cmd_search, _arguments)
