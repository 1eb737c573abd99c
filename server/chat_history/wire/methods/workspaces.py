"""The workspaces family: ``chatHistory/moveWorkspace`` and ``listWorkspaces``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from chat_history.service import workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import (
    check_workspace,
)
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import (
    NoParams,
    wire,
)

if TYPE_CHECKING:
    pass


@attrs.define
class MoveWorkspaceParams:
    """``chatHistory/moveWorkspace``: no conversation key."""

    from_: str = attrs.field(kw_only=True)
    to: str = attrs.field(kw_only=True)


def move_args(params: MoveWorkspaceParams) -> tuple[str, str]:
    """(from, to), checked: ``from`` names stored history as listed, ``to`` a folder by its
    real path (a symlink's target, as every session names it)."""
    return check_workspace(params.from_, "from"), workspaces.named_workspace(
        check_workspace(params.to, "to")
    )


def move_workspace(m: ChatHistoryManager, ls: Session, p: MoveWorkspaceParams) -> Any:
    """``chatHistory/moveWorkspace``: re-key one workspace's conversations under another."""
    return {"conversations": workspaces.move(m, *move_args(p))}


def list_workspaces(m: ChatHistoryManager, ls: Session, p: NoParams) -> Any:
    """``chatHistory/listWorkspaces``: every workspace, with what this machine knows of each."""
    return {"workspaces": wire(workspaces.list_all(m, ls.machine))}


METHODS = (
    Method("chatHistory/moveWorkspace", MoveWorkspaceParams, move_workspace, inline=False),
    Method("chatHistory/listWorkspaces", NoParams, list_workspaces),
)
