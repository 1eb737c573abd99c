"""The edits a person makes by hand: ``rename``, ``truncate`` (which deletes, for good) and
``fork``, each one manager call; ``EDIT_FLAGS`` names an edit's refusal by the command-line name
that gave the value."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from chat_history.cli.common import (
    EXIT_USAGE,
    CliError,
    Subcommand,
    add_holder_workspace,
    find_key,
    open_manager,
)
from chat_history.errors import InvalidParams
from chat_history.model import Key
from chat_history.service import conversations as service_conversations
from chat_history.service import edits as service_edits
from chat_history.service.workspaces import named_workspace

#: The one table from the field id of an edit's refusal (InvalidParams) to the command-line
#: name that gave the value.
EDIT_FLAGS = {
    "title": "TITLE",
    "from_id": "--from",
    "through_id": "--through",
    "new_conversation_id": "NEW",
    "conversation_id": "CONVERSATION",
    "from": "FROM",
    "to": "TO",
}


def edited(run: Callable[[], Any]) -> Any:
    """Run an edit; a refusal (InvalidParams) is reported by its command-line name."""
    try:
        return run()
    except InvalidParams as exc:
        raise CliError(f"{EDIT_FLAGS.get(exc.field, exc.field)}: {exc.why}") from None


def cmd_rename(args: argparse.Namespace) -> int:
    """Set a conversation's title (chatHistory/updateConversation), or back to the automatic
    one with --automatic."""
    from chat_history.service.conversations import ConversationUpdate

    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    if (args.title is None) == (not args.automatic):
        raise CliError("give a TITLE, or --automatic (not both)", EXIT_USAGE)
    change = ConversationUpdate(set_title=True, title=args.title)
    info = edited(lambda: service_conversations.update(manager, key, change))
    print(f"{key.conversation}: {info.title!r} ({info.title_source or 'no'} title)")
    return 0


def cmd_truncate(args: argparse.Namespace) -> int:
    """Delete message #ID and every later one (chatHistory/truncate)."""
    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    result = edited(lambda: service_edits.truncate(manager, key, args.from_id))
    gone = " and its summary" if result.summary_deleted else ""
    print(f"{key.conversation}: deleted {result.deleted_messages} message(s){gone}.")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Copy a conversation (through message #ID) into a new one (chatHistory/fork)."""
    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    target = Key(args.to_workspace or key.workspace, args.new)
    info = edited(lambda: service_conversations.fork(manager, key, target, args.through))
    print(
        f"{info.conversation_id}: {info.message_count} message(s) copied from "
        f"{key.conversation}" + (f" into workspace {info.workspace!r}" if args.to_workspace else "")
    )
    return 0


def _rename_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("title", nargs="?", metavar="TITLE", help="1-200 characters")
    p.add_argument("--automatic", action="store_true", help="back to the automatic title")
    add_holder_workspace(p)


def _truncate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("--from", dest="from_id", type=int, required=True, metavar="ID")
    add_holder_workspace(p)


def _fork_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("new", metavar="NEW", help="the new conversation's id")
    p.add_argument("--through", type=int, metavar="ID", help="copy up to message #ID")
    add_holder_workspace(p)
    p.add_argument(
        "--to-workspace", metavar="W", type=named_workspace, help="the new conversation's workspace"
    )


RENAME = Subcommand(cmd_rename, _rename_arguments)
TRUNCATE = Subcommand(cmd_truncate, _truncate_arguments)
FORK = Subcommand(cmd_fork, _fork_arguments)
