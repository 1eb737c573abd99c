"""A symlinked folder and its target are one history (issue 43 item 12), however the folder is
named: a session's workspace (two servers on one store, one opened on the link's URI and one on
the target's), a request's ``workspace``, ``moveWorkspace``'s ``to``, the CLI's ``--workspace``
(a URI or a path) and the MCP server's, each naming the link or a folder under it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from tests.e2e.conftest import StartSession
from tests.e2e.test_cli import run
from tests.e2e.test_workspaces import folder, titles, user

from chat_history.model import Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the project folder, a symlink to it, a symlink to its parent: paths pass through it)."""
    proj = tmp_path / "real" / "proj"
    (proj / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(proj, target_is_directory=True)
    parent = tmp_path / "via"
    parent.symlink_to(tmp_path / "real", target_is_directory=True)
    return proj, link, parent


async def test_two_servers_on_the_link_and_the_target_share_conversations(
    start_session: StartSession, tmp_path: Path, tree: tuple[Path, Path, Path]
) -> None:
    proj, link, parent = tree
    storage = tmp_path / "store"
    by_link = await start_session(storage=storage, workspace_folders=folder(link.as_uri()))
    await by_link.append("from-link", user("written through the link"))
    by_target = await start_session(storage=storage, workspace_folders=folder(proj.as_uri()))
    await by_target.append("from-target", user("written in the folder itself"))
    through = await start_session(
        storage=storage, init_options={"workspace": (parent / "proj").as_uri()}
    )
    for session in (by_link, by_target, through):
        assert await titles(session) == ["from-link", "from-target"]
    sub = await start_session(storage=storage, workspace_folders=folder((link / "sub").as_uri()))
    await sub.append("below", user("in a folder under the link"))
    below = await start_session(storage=storage, workspace_folders=folder((proj / "sub").as_uri()))
    assert await titles(below) == ["below"]


async def test_a_request_naming_the_link_reads_the_targets_history(
    start_session: StartSession, tmp_path: Path, tree: tuple[Path, Path, Path]
) -> None:
    proj, link, parent = tree
    storage = tmp_path / "store"
    session = await start_session(storage=storage, workspace_folders=folder(proj.as_uri()))
    await session.append("c1", user("in the folder"))
    for spelling in (link.as_uri(), (parent / "proj").as_uri(), str(link), link.as_uri() + "/"):
        assert await titles(session, spelling) == ["c1"], spelling
        got = await session.request(
            "chatHistory/get", {"conversationId": "c1", "workspace": spelling}
        )
        assert [m["content"] for m in got["messages"]] == ["in the folder"]
    elsewhere = await start_session(storage=storage, workspace_folders=folder("file:///else"))
    await elsewhere.request(
        "chatHistory/append",
        {"conversationId": "c2", "workspace": link.as_uri(), "messages": [user("named")]},
    )
    assert await titles(session) == ["c1", "c2"]
    moved = await elsewhere.request(
        "chatHistory/moveWorkspace", {"from": "file:///old", "to": link.as_uri()}
    )
    assert moved == {"conversations": 0}
    workspaces = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    assert [w["workspace"] for w in workspaces] == [proj.resolve().as_uri()]


def seed(db: Path, proj: Path) -> None:
    manager = ChatHistoryManager.open(db)
    try:
        history.append(
            manager,
            Key(proj.resolve().as_uri(), "c1"),
            [Message(role="user", content="the retry loop backs off with jitter")],
        )
    finally:
        manager.close()


def test_the_cli_workspace_naming_the_link_is_the_targets(
    tmp_path: Path, tree: tuple[Path, Path, Path]
) -> None:
    proj, link, parent = tree
    db = tmp_path / "history.sqlite3"
    seed(db, proj)
    env = {"TZ": "UTC", "PATH": "/usr/bin:/bin"}
    for spelling in (link.as_uri(), str(link), (parent / "proj").as_uri(), str(parent / "proj")):
        listed = run(env, "--db", db, "conversations", "--workspace", spelling, "--json")
        assert listed.returncode == 0, listed.stderr
        assert [c["conversationId"] for c in json.loads(listed.stdout)["conversations"]] == [
            "c1"
        ], spelling
        shown = run(env, "--db", db, "show", "c1", "--workspace", spelling)
        assert shown.returncode == 0 and "jitter" in shown.stdout, shown.stderr
        found = run(env, "--db", db, "search", "jitter", "--workspace", spelling)
        assert found.returncode == 0 and "c1" in found.stdout, found.stdout


@pytest.mark.asyncio
async def test_the_mcp_workspace_naming_the_link_is_the_targets(
    tmp_path: Path, tree: tuple[Path, Path, Path]
) -> None:
    proj, link, parent = tree
    db = tmp_path / "history.sqlite3"
    seed(db, proj)
    for spelling in (link.as_uri(), str(parent / "proj")):
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "chat_history.cli", "--db", str(db), "mcp", "--workspace", spelling],
        )
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            result = await client.call_tool("list_conversations", {})
            assert not result.is_error
            assert isinstance(result.content[0], types.TextContent)
            assert result.structured_content is not None
            listed = result.structured_content["conversations"]
            assert [c["conversationId"] for c in listed] == ["c1"], spelling
