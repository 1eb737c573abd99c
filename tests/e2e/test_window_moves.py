"""A window's own ``moveWorkspace`` and the change watch (protocol.md "Version 3" → Several
windows on one conversation, Workspace identity), over real server processes on one database:
the window that moved never hears of its move (issue 35 item 11: the next commit by anyone
made it report ``clear`` for every conversation it moved out and ``append`` for every one it
moved in), while the other windows of both workspaces do."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.test_windows import CHANGED, turn
from tests.e2e.wire import Wire

HOME = "file:///home/ada/project"
AWAY = "file:///home/ada/elsewhere"
OTHER = "file:///home/ada/unrelated"

pytestmark = pytest.mark.engines

Opener = Callable[[str], Wire]


@pytest.fixture
def open_window(tmp_path: Path, databases: Databases | None) -> Iterator[Opener]:
    """Servers on one storage folder (on PostgreSQL: one database), each on its workspace."""
    opened: list[Wire] = []
    url = databases.url(tmp_path) if databases is not None else None

    def open_one(workspace: str) -> Wire:
        options: dict[str, Any] = {"workspace": workspace}
        if url is not None:
            options["database"] = url
        wire = Wire(tmp_path)
        opened.append(wire)
        wire.initialize(configuration=False, options=options)
        return wire

    try:
        yield open_one
    finally:
        for wire in opened:
            with contextlib.suppress(Exception):
                wire.close()


def told(wire: Wire, since: int = 0) -> list[tuple[str, str, int | None]]:
    """(conversation, reason, lastId) of each ``chatHistory/changed`` the window got, from the
    ``since``-th on."""
    return sorted(
        (c["conversationId"], c["reason"], c["lastId"]) for c in wire.messages_of(CHANGED)[since:]
    )


def settle(*wires: Wire) -> list[int]:
    """Each window answered a request and stayed idle past the bound (so it has told what it
    will of the writes so far); how many changes each was told."""
    for wire in wires:
        wire.call("chatHistory/listConversations", {})
    for wire in wires:
        wire.drain(2.5)
    return [len(wire.messages_of(CHANGED)) for wire in wires]


def test_the_window_that_moves_its_workspace_away_hears_nothing_of_it(
    open_window: Opener,
) -> None:
    mover, beside, other = open_window(HOME), open_window(HOME), open_window(OTHER)
    turn(mover, "a", "one")
    turn(mover, "b", "two")
    assert settle(mover, beside, other) == [0, 2, 0]  # beside heard of the appends

    moved = mover.call("chatHistory/moveWorkspace", {"from": HOME, "to": AWAY})
    assert moved == {"conversations": 2}
    turn(other, "z", "a commit by another process, anywhere")
    mover.call("chatHistory/listConversations", {})  # a request: it looks again before it
    mover.drain(2.5)  # and while idle, past the 2 s bound
    assert told(mover) == []
    # The other window of HOME saw both conversations go; OTHER's own write is its own.
    beside.drain(0.5)
    assert told(beside, 2) == [("a", "clear", None), ("b", "clear", None)]
    assert told(other) == []


def test_the_window_that_moves_conversations_into_its_workspace_hears_nothing_of_it(
    open_window: Opener,
) -> None:
    mover, beside, away = open_window(HOME), open_window(HOME), open_window(AWAY)
    stored = turn(away, "c", "written elsewhere")
    assert settle(mover, beside, away) == [0, 0, 0]  # nothing of HOME was written

    mover.call("chatHistory/moveWorkspace", {"from": AWAY, "to": HOME})
    turn(away, "d", "a commit by another process")  # AWAY's own window writes again
    mover.call("chatHistory/listConversations", {})
    mover.drain(2.5)
    assert told(mover) == []
    beside.drain(0.5)
    assert told(beside) == [("c", "append", stored[-1]["id"])]
    # The window of AWAY saw its conversation leave (it never hears of its own "d").
    assert told(away) == [("c", "clear", None)]
