"""``workspaces`` and ``move-workspace``: the workspace identities that hold conversations (with
their folders and the conversations renamed on the way in), and every conversation of one moved
to another in one change."""

from __future__ import annotations

import argparse

from chat_history.cli.common import Subcommand, machine_of, open_manager, print_json
from chat_history.cli.edits import edited
from chat_history.cli.render import when
from chat_history.service import workspaces as service_workspaces
from chat_history.service.workspaces import named_workspace
from chat_history.wire import protocol


def cmd_workspaces(args: argparse.Namespace) -> int:
    """``workspaces``: each workspace with its conversations, last activity and folder, and the
    conversations renamed because their id was taken (``--json``: listWorkspaces' result)."""
    manager = open_manager(args)
    infos = service_workspaces.list_all(manager, machine_of(args))
    if args.json:
        print_json({"workspaces": protocol.wire(infos)})
        return 0
    if not infos:
        print(f"No workspaces in {manager.database_path}.")
        return 0
    for info in infos:
        where = ""
        if info.folder is not None:
            state = {True: "", False: " (gone)", None: " (another machine)"}[info.folder_exists]
            where = f"  {info.folder}{state}"
        print(
            f"{info.workspace}  {info.conversations} conversation(s), last "
            f"{when(info.last_activity)}{where}"
        )
        for renamed in info.renamed:
            print(
                f"  {renamed.conversation_id!r} was {renamed.was!r} under {renamed.from_} "
                f"(renamed {when(renamed.at)}: its id was taken here)"
            )
    return 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    """``move-workspace FROM TO``: every conversation of FROM moved to TO (moveWorkspace)."""
    manager = open_manager(args)
    moved = edited(lambda: service_workspaces.move(manager, args.source, args.target))
    print(f"moved {moved} conversation(s) from {args.source} to {args.target}.")
    return 0


def _list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the result as chatHistory/listWorkspaces's")


def _move_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="FROM", help="the workspace identity that holds them")
    p.add_argument(
        "target",
        metavar="TO",
        type=named_workspace,  # a folder by its real path, as the wire's moveWorkspace ``to``
        help="the workspace identity to hold them",
    )


LIST = Subcommand(cmd_workspaces, _list_arguments)
MOVE = Subcommand(cmd_move_workspace, _move_arguments)
