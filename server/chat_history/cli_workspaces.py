"""The CLI's workspace and engine commands (protocol.md "Version 3"): ``workspaces`` (as
chatHistory/listWorkspaces), ``move-workspace FROM TO`` (as chatHistory/moveWorkspace) and
``purge`` (the engine's purge of deleted text now: on PostgreSQL the table rewrite, which needs
the tables' owner; on SQLite the WAL reset)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from chat_history import protocol
from chat_history.render import when


def _machine(args: argparse.Namespace) -> str:
    from chat_history.cli import database_location
    from chat_history.workspaces import machine_id

    folder, _ = database_location(getattr(args, "db", None))
    return machine_id(folder)


def cmd_workspaces(args: argparse.Namespace) -> int:
    from chat_history.cli import open_manager, print_json

    manager = open_manager(args)
    infos = manager.workspace_infos(_machine(args))
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
    return 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    from chat_history.cli import edited, open_manager

    manager = open_manager(args)
    moved = edited(
        lambda: manager.move_workspace(args.source, args.target),
        lambda field: {"from": "FROM", "to": "TO"}.get(field, field),
    )
    print(f"moved {moved} conversation(s) from {args.source} to {args.target}.")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    from chat_history.cli import CliError, open_manager

    manager = open_manager(args)
    if not manager.purge():
        raise CliError("the purge did not finish (see the log above); nothing was lost")
    print(f"purged deleted text from {manager.database_path}.")
    return 0


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    p = command("workspaces", cmd_workspaces, "list workspaces with conversations (listWorkspaces)")
    p.add_argument("--json", action="store_true", help="the result as chatHistory/listWorkspaces's")
    p = command(
        "move-workspace", cmd_move_workspace, "move every conversation of FROM to TO (one change)"
    )
    p.add_argument("source", metavar="FROM", help="the workspace identity that holds them")
    p.add_argument("target", metavar="TO", help="the workspace identity to hold them")
    command("purge", cmd_purge, "take deleted text out of the database files now")
