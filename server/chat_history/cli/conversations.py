"""``conversations`` and ``show``: what is stored, read with storage retention off — the listing
per workspace, one conversation's history (as text, JSON, or a provider's request body)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from chat_history.cli.common import (
    EXIT_USAGE,
    CliError,
    Subcommand,
    add_holder_workspace,
    find_key,
    load_cli_settings,
    open_manager,
    print_json,
    reading,
)
from chat_history.cli.render import conversations_table, history_text
from chat_history.errors import InvalidParams
from chat_history.service import conversations as service_conversations
from chat_history.service import history
from chat_history.service.conversations import ConversationInfo
from chat_history.service.workspaces import named_workspace
from chat_history.wire import protocol, reports


def by_workspace(
    listed: Sequence[ConversationInfo],
) -> list[tuple[str, list[ConversationInfo]]]:
    """The listing grouped by workspace (sorted), each in the listing's order: newest activity
    first."""
    groups: dict[str, list[ConversationInfo]] = {}
    for info in listed:
        groups.setdefault(info.workspace, []).append(info)
    return sorted(groups.items())


def cmd_conversations(args: argparse.Namespace) -> int:
    """``conversations``: every conversation per workspace, as ``listConversations`` lists them
    (``--json``: its entries)."""
    manager = open_manager(args)
    listed = by_workspace(
        service_conversations.list_page(manager, args.workspace, None, None).conversations
    )
    if args.json:
        print_json(reports.wire_listing([info for _, infos in listed for info in infos]))
    elif not listed:
        where = f" in workspace {args.workspace!r}" if args.workspace is not None else ""
        print(f"No conversations{where} in {manager.database_path}.")
    else:
        print(conversations_table(listed))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``show``: one conversation's rows and summary as text, as JSON, or (``--provider``) as that
    provider's request body."""
    settings = load_cli_settings(args).settings
    manager = open_manager(args, reading(settings))
    key = find_key(manager, args.conversation, args.workspace)
    if args.provider is not None:
        try:
            request = history.format(manager, key, args.provider, args.model)
        except InvalidParams as exc:
            raise CliError(f"argument --provider: {exc.why}", EXIT_USAGE) from None
        print_json(protocol.wire(request))
        return 0
    result = history.get(manager, key)
    if args.json:
        print_json(reports.wire_history(key.workspace, key.conversation, result))
    else:
        print(history_text(key, result.messages, result.summary, full=args.full))
    return 0


def _listing_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("conversation", metavar="CONVERSATION")
    add_holder_workspace(p)
    p.add_argument("--provider", metavar="KIND", help="print the provider body (format) instead")
    p.add_argument("--model", metavar="MODEL", help="model for --provider")
    p.add_argument("--json", action="store_true", help="the stored rows as JSON")
    p.add_argument("--full", action="store_true", help="do not shorten tool results")


LIST = Subcommand(cmd_conversations, _listing_arguments)
SHOW = Subcommand(cmd_show, _show_arguments, settings=True)
