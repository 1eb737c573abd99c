"""Issue 35 item 5: a conversation that re-keying renamed (its id was taken where it went) is said
in ``chatHistory/listWorkspaces`` (``renamed``) and in the CLI's ``workspaces``, from a stored
record that follows its conversation (``moveWorkspace``) and is forgotten with it (``clear``,
retention that empties it): the old workspace spelling is a path, and goes when the history
goes. Over real server processes on both engines; the record's table is read directly, since the
listing shows only the records of conversations that exist."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.conftest import Session, StartSession
from tests.e2e.reliability import occurrences
from tests.e2e.test_cli import run
from tests.e2e.test_workspace_spellings import contents, listed_pairs
from tests.e2e.test_workspaces import open_store

from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Key

pytestmark = pytest.mark.engines

#: What servers before version 3 wrote: one folder under two spellings, one conversation id.
SPELLINGS = {"file:///c%3A/proj": "written by VS Code", "file:///C:/proj/": "written by Neovim"}
NORMALIZED = "file:///c:/proj"
RENAMED = "main (moved)"
HOURS_AGO = 3  # older than the maxAgeHours below, younger than the default's


def write_v2(storage: Path, databases: Databases | None, timestamp: int | None = None) -> None:
    manager = ChatHistoryManager(open_store(storage, databases))
    for workspace, text in SPELLINGS.items():
        message = Message(role="user", content=text, timestamp=timestamp)
        history.append(manager, Key(workspace, "main"), [message])
    manager.close()


def stored_records(storage: Path, databases: Databases | None) -> list[tuple[Any, ...]]:
    """Every row of the rename records, read from the store itself (not the listing)."""
    store = open_store(storage, databases)
    try:
        with store.read() as reading:
            return [
                tuple(row)
                for row in reading.connection.execute(
                    "SELECT workspace, conversation, was, came_from FROM conversation_renames"
                ).fetchall()
            ]
    finally:
        store.close()


async def workspaces(session: Session) -> dict[str, dict[str, Any]]:
    listed = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    return {w["workspace"]: w for w in listed}


async def opened_with_a_rename(session: Session) -> str:
    """The spelling whose ``main`` was renamed, as ``listWorkspaces`` says it, checked against
    what the renamed conversation holds."""
    [renamed] = (await workspaces(session))[NORMALIZED]["renamed"]
    assert set(renamed) == {"conversationId", "was", "from", "at"}
    assert (renamed["conversationId"], renamed["was"]) == (RENAMED, "main")
    assert renamed["from"] in SPELLINGS and isinstance(renamed["at"], int)
    assert await contents(session, NORMALIZED, RENAMED) == [SPELLINGS[renamed["from"]]]
    return str(renamed["from"])


def cli_where(storage: Path, databases: Databases | None) -> list[str]:
    if databases is None:
        return ["--db", str(storage)]
    return ["--database", databases.url(storage)]


async def test_list_workspaces_says_the_rename_and_clear_forgets_it(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    write_v2(storage, databases)
    session = await start_session(storage=storage)
    came_from = await opened_with_a_rename(session)
    assert stored_records(storage, databases) == [(NORMALIZED, RENAMED, "main", came_from)]
    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(tmp_path / "cli")}
    listed = run(env, *cli_where(storage, databases), "workspaces", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)["workspaces"]
    assert [(r["conversationId"], r["was"], r["from"]) for r in entry["renamed"]] == [
        (RENAMED, "main", came_from)
    ]
    text = run(env, *cli_where(storage, databases), "workspaces")
    assert f"'{RENAMED}' was 'main' under {came_from}" in text.stdout, text.stdout
    if databases is None:
        assert occurrences(storage, came_from) > 0, "the test could not fail"

    cleared = await session.request(
        "chatHistory/clear", {"workspace": NORMALIZED, "conversationId": RENAMED}
    )
    assert cleared == {"deletedMessages": 1}
    assert (await workspaces(session))[NORMALIZED]["renamed"] == []
    assert stored_records(storage, databases) == []
    if databases is None:  # deleted means deleted: the path is in no byte of the files
        assert occurrences(storage, came_from) == 0
    assert await listed_pairs(session) == {(NORMALIZED, "main")}
    text = run(env, *cli_where(storage, databases), "workspaces")
    assert "was 'main'" not in text.stdout and text.returncode == 0


async def test_move_workspace_carries_the_rename(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    write_v2(storage, databases)
    session = await start_session(storage=storage)
    came_from = await opened_with_a_rename(session)
    moved = await session.request(
        "chatHistory/moveWorkspace", {"from": NORMALIZED, "to": "file:///d:/proj"}
    )
    assert moved == {"conversations": 2}
    listed = await workspaces(session)
    assert set(listed) == {"file:///d:/proj"}
    [renamed] = listed["file:///d:/proj"]["renamed"]
    assert (renamed["conversationId"], renamed["was"], renamed["from"]) == (
        RENAMED,
        "main",
        came_from,
    )
    assert stored_records(storage, databases) == [("file:///d:/proj", RENAMED, "main", came_from)]
    assert await contents(session, "file:///d:/proj", RENAMED) == [SPELLINGS[came_from]]
    # and it goes with its conversation there
    await session.request(
        "chatHistory/clear", {"workspace": "file:///d:/proj", "conversationId": RENAMED}
    )
    assert stored_records(storage, databases) == []


async def test_retention_that_empties_the_renamed_conversation_forgets_its_record(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    write_v2(storage, databases, timestamp=int(time.time() * 1000) - HOURS_AGO * 3_600_000)
    session = await start_session(storage=storage, settings={"maxAgeHours": 1})
    [renamed] = (await workspaces(session))[NORMALIZED]["renamed"]
    came_from = renamed["from"]
    if databases is None:
        assert occurrences(storage, came_from) > 0, "the test could not fail"
    got = await session.request(
        "chatHistory/get", {"workspace": NORMALIZED, "conversationId": RENAMED}
    )
    assert got["messages"] == [] and got["pruned"]["reasons"] == ["age"]
    assert (await workspaces(session))[NORMALIZED]["renamed"] == []
    assert stored_records(storage, databases) == []
    if databases is None:
        assert occurrences(storage, came_from) == 0


async def test_truncating_the_renamed_conversation_to_nothing_forgets_its_record(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    write_v2(storage, databases)
    session = await start_session(storage=storage)
    came_from = await opened_with_a_rename(session)
    got = await session.request(
        "chatHistory/get", {"workspace": NORMALIZED, "conversationId": RENAMED}
    )
    truncated = await session.request(
        "chatHistory/truncate",
        {"workspace": NORMALIZED, "conversationId": RENAMED, "fromId": got["messages"][0]["id"]},
    )
    assert truncated["deletedMessages"] == 1
    assert (await workspaces(session))[NORMALIZED]["renamed"] == []
    assert stored_records(storage, databases) == []
    if databases is None:
        assert occurrences(storage, came_from) == 0
