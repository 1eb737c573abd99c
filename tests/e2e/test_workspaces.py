"""Identity that follows the project (protocol.md "Version 3" → Workspace identity) over real
server processes, on both engines: another editor's spelling of the folder's URI, a moved git
folder, another live clone, ``workspaceIdentity: "repository"``, ``moveWorkspace`` and
``listWorkspaces``; and on PostgreSQL two "machines" (different HOME, storage folders and folder
paths) sharing one database."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from tests.conftest import Databases
from tests.e2e.conftest import StartSession
from tests.pgcluster import Cluster

from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import HistoryStore, Key, Store
from chat_history.store.postgres import PostgresStore

pytestmark = pytest.mark.engines

REMOTE = "git@github.com:example/proj.git"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def git_folder(path: Path, remote: str = REMOTE) -> Path:
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = ' + remote + "\n"
        '\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch "main"]\n\tremote = origin\n'
    )
    return path


def open_store(folder: Path, databases: Databases | None) -> HistoryStore:
    """The store a server on ``folder`` opens: its SQLite file, or its PostgreSQL database."""
    return Store(folder) if databases is None else PostgresStore(databases.url(folder))


def folder(uri: str) -> list[types.WorkspaceFolder]:
    return [types.WorkspaceFolder(uri=uri, name="proj")]


async def titles(session: Any, workspace: str | None = None) -> list[str]:
    params = {} if workspace is None else {"workspace": workspace}
    listed = await session.request("chatHistory/listConversations", params)
    return sorted(c["conversationId"] for c in listed["conversations"])


async def test_vscode_and_neovim_spellings_of_one_windows_folder_share_history(
    start_session: StartSession, tmp_path: Path
):
    storage = tmp_path / "store"
    vscode = await start_session(
        storage=storage, workspace_folders=folder("file:///c%3A/Users/me/proj")
    )
    await vscode.append("c1", user("from VS Code"))
    neovim = await start_session(
        storage=storage, workspace_folders=folder("file:///C:/Users/me/proj/")
    )
    got = await neovim.request("chatHistory/get", {"conversationId": "c1"})
    assert [m["content"] for m in got["messages"]] == ["from VS Code"]
    listed = await neovim.request("chatHistory/listConversations", {})
    assert listed["conversations"][0]["workspace"] == "file:///c:/Users/me/proj"


async def test_conversations_under_an_unnormalized_spelling_are_rekeyed_when_opened(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    # What a version 2 server stored: the raw URI as the key (today's requests are normalized,
    # so the old keys are written through the store).
    manager = ChatHistoryManager(open_store(storage, databases))
    history.append(
        manager, Key("file:///C:/Users/me/proj/", "c1"), [Message(role="user", content="old")]
    )
    history.append(
        manager, Key("file:///C:/Users/me/other", "c2"), [Message(role="user", content="o")]
    )
    manager.close()
    new = await start_session(
        storage=storage, workspace_folders=folder("file:///c%3a/Users/me/proj")
    )
    assert await titles(new) == ["c1"]
    listed = await new.request("chatHistory/listConversations", {"allWorkspaces": True})
    # Every old spelling, this folder's or another's (requests reach normalized keys only).
    assert sorted(c["workspace"] for c in listed["conversations"]) == [
        "file:///c:/Users/me/other",
        "file:///c:/Users/me/proj",
    ]
    assert await titles(new, "file:///C:/Users/me/other") == ["c2"]


async def test_move_workspace_finds_an_old_key_by_any_spelling_of_its_folder(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    session = await start_session(storage=storage)  # no folder: nothing re-keyed on opening
    manager = ChatHistoryManager(open_store(storage, databases))
    history.append(
        manager, Key("file:///C:/Users/me/other/", "c2"), [Message(role="user", content="o")]
    )
    manager.close()
    moved = await session.request(
        "chatHistory/moveWorkspace", {"from": "file:///c%3A/Users/me/other", "to": "file:///o"}
    )
    assert moved == {"conversations": 1}
    assert await titles(session, "file:///o") == ["c2"]


async def test_a_request_names_one_folder_in_every_editor_s_spelling(
    start_session: StartSession, tmp_path: Path
):
    """A request's own ``workspace`` is normalized as the session's identity is: Neovim's and
    VS Code's spellings of one Windows folder read and write one history, from a session of
    another workspace."""
    neovim, vscode = "file:///C:/Users/me/proj/", "file:///c%3A/Users/me/proj"
    session = await start_session(workspace_folders=folder("file:///elsewhere"))
    await session.append("c1", user("written the Neovim way"), workspace=neovim)
    await session.append("c1", user("written the VS Code way"), workspace=vscode)
    await session.request(
        "chatHistory/saveSummary", {"conversationId": "c1", "summary": "s", "workspace": neovim}
    )
    for spelling in (neovim, vscode, "file://localhost/c:/Users/me/proj"):
        got = await session.request(
            "chatHistory/get", {"conversationId": "c1", "workspace": spelling}
        )
        assert [m["content"] for m in got["messages"]] == [
            "written the Neovim way",
            "written the VS Code way",
        ]
        assert got["summary"]["summary"] == "s"
        assert await titles(session, spelling) == ["c1"]
        found = await session.request(
            "chatHistory/search", {"query": "written", "workspace": spelling}
        )
        assert len(found["results"]) == 2
    listed = await session.request("chatHistory/listConversations", {"allWorkspaces": True})
    assert [c["workspace"] for c in listed["conversations"]] == ["file:///c:/Users/me/proj"]
    await session.request(
        "chatHistory/fork",
        {
            "conversationId": "c1",
            "workspace": vscode,
            "newConversationId": "c2",
            "newWorkspace": "file:///D:/x/",
        },
    )
    assert await titles(session, "file:///d:/x") == ["c2"]
    moved = await session.request(
        "chatHistory/moveWorkspace", {"from": neovim, "to": "file:///D%3a/x/"}
    )
    assert moved == {"conversations": 1}
    assert await titles(session, "file:///d:/x") == ["c1", "c2"]
    assert await titles(session, vscode) == []


async def test_in_repository_mode_a_request_naming_the_session_s_folder_is_its_history(
    start_session: StartSession, tmp_path: Path
):
    """The session's identity is ``repo:…``: a request that spells out the session's own folder
    (any spelling) reads and writes the session's history, never a second one beside it; another
    folder's URI is that folder's identity."""
    proj = git_folder(tmp_path / "proj")
    session = await start_session(
        storage=tmp_path / "store",
        workspace_folders=folder(proj.as_uri()),
        init_options={"workspaceIdentity": "repository"},
    )
    await session.append("c1", user("default workspace"))
    await session.append("c1", user("named folder"), workspace=proj.as_uri() + "/")
    got = await session.request("chatHistory/get", {"conversationId": "c1"})
    assert [m["content"] for m in got["messages"]] == ["default workspace", "named folder"]
    assert await titles(session, proj.as_uri()) == ["c1"]
    await session.append("c2", user("another folder"), workspace=(tmp_path / "other").as_uri())
    listed = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    assert sorted(w["workspace"] for w in listed) == [
        (tmp_path / "other").as_uri(),
        "repo:github.com/example/proj/",
    ]


async def test_a_moved_git_folder_keeps_its_history_and_a_live_clone_never_takes_it(
    start_session: StartSession, tmp_path: Path
):
    storage = tmp_path / "store"
    first = git_folder(tmp_path / "code" / "proj")
    session = await start_session(storage=storage, workspace_folders=folder(first.as_uri()))
    await session.append("c1", user("before the move"))
    # Another clone of the same repository, still there: it starts empty, and keeps it so.
    clone = git_folder(tmp_path / "elsewhere" / "proj-clone")
    other = await start_session(storage=storage, workspace_folders=folder(clone.as_uri()))
    assert await titles(other) == []
    moved = tmp_path / "renamed" / "proj-2"
    moved.parent.mkdir()
    os.rename(first, moved)
    after = await start_session(storage=storage, workspace_folders=folder(moved.as_uri()))
    got = await after.request("chatHistory/get", {"conversationId": "c1"})
    assert [m["content"] for m in got["messages"]] == ["before the move"]
    assert await titles(after, first.as_uri()) == []
    # The clone still has none (its folder exists: never a candidate, and never a source).
    again = await start_session(storage=storage, workspace_folders=folder(clone.as_uri()))
    assert await titles(again) == []


async def test_repository_identity_names_every_clone_alike_and_adopts_the_folders_history(
    start_session: StartSession, tmp_path: Path
):
    storage = tmp_path / "store"
    one = git_folder(tmp_path / "a" / "proj")
    (one / "sub").mkdir()
    before = await start_session(storage=storage, workspace_folders=folder(one.as_uri()))
    await before.append("c1", user("kept by the folder"))
    session = await start_session(
        storage=storage,
        workspace_folders=folder(one.as_uri()),
        init_options={"workspaceIdentity": "repository"},
    )
    listed = await session.request("chatHistory/listConversations", {})
    assert [c["workspace"] for c in listed["conversations"]] == ["repo:github.com/example/proj/"]
    two = git_folder(tmp_path / "b" / "checkout", "https://github.com/example/proj")
    clone = await start_session(
        storage=storage,
        workspace_folders=folder(two.as_uri()),
        settings={"workspaceIdentity": "repository"},
    )
    assert await titles(clone) == ["c1"]
    inner = await start_session(
        storage=storage,
        workspace_folders=folder((one / "sub").as_uri()),
        settings={"workspaceIdentity": "repository"},
    )
    assert await titles(inner) == []  # another folder of the repository: its own history


async def test_move_workspace_and_list_workspaces(start_session: StartSession, tmp_path: Path):
    storage = tmp_path / "store"
    proj = git_folder(tmp_path / "proj")
    session = await start_session(storage=storage, workspace_folders=folder(proj.as_uri()))
    await session.append("c1", user("one"))
    await session.append("c2", user("two"))
    await session.append("c2", user("elsewhere"), workspace="file:///old/place")
    await session.append("c3", user("three"), workspace="file:///old/place")
    listed = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    by_name = {w["workspace"]: w for w in listed}
    here = by_name[proj.as_uri()]
    assert here["conversations"] == 2
    assert here["folder"] == str(proj)
    assert here["folderExists"] is True
    assert here["repository"] == "github.com/example/proj"
    assert isinstance(here["lastActivity"], int)
    assert by_name["file:///old/place"] == {
        "workspace": "file:///old/place",
        "conversations": 2,
        "lastActivity": by_name["file:///old/place"]["lastActivity"],
        "folder": None,
        "folderExists": None,
        "repository": None,
        "renamed": [],
    }
    # c2 is under both: nothing moves.
    with pytest.raises(JsonRpcException) as caught:
        await session.request(
            "chatHistory/moveWorkspace", {"from": "file:///old/place", "to": proj.as_uri()}
        )
    assert caught.value.code == -32602
    assert caught.value.data == {"field": "to"}
    assert await titles(session, "file:///old/place") == ["c2", "c3"]
    await session.request("chatHistory/clear", {"conversationId": "c2"})
    moved = await session.request(
        "chatHistory/moveWorkspace", {"from": "file:///old/place", "to": proj.as_uri()}
    )
    assert moved == {"conversations": 2}
    assert await titles(session) == ["c1", "c2", "c3"]
    got = await session.request("chatHistory/get", {"conversationId": "c2"})
    assert [m["content"] for m in got["messages"]] == ["elsewhere"]
    for bad, field in (({"from": "", "to": "x"}, "from"), ({"from": "x"}, "to")):
        with pytest.raises(JsonRpcException) as caught:
            await session.request("chatHistory/moveWorkspace", bad)
        assert caught.value.data == {"field": field}


@pytest.mark.sqlite_only
async def test_two_machines_share_one_database_by_repository(
    start_session: StartSession, tmp_path: Path, pg_cluster: Cluster
):
    """The cross-machine e2e: two servers with their own HOME, storage folder and folder path
    (a laptop and a container), "repository" identity, one PostgreSQL database."""
    databases = Databases(pg_cluster)
    try:
        url = databases.url(tmp_path / "shared")
        sessions = []
        for name, remote in (
            ("laptop", REMOTE),
            ("container", "https://github.com/example/proj.git"),
        ):
            home = tmp_path / name / "home"
            home.mkdir(parents=True)
            checkout = git_folder(tmp_path / name / "src" / "proj", remote)
            sessions.append(
                await start_session(
                    storage=tmp_path / name / "storage",
                    workspace_folders=folder(checkout.as_uri()),
                    init_options={"database": url, "workspaceIdentity": "repository"},
                    env={"HOME": str(home)},
                    settings={"maxMessages": 3},
                )
            )
        laptop, container = sessions
        stored = await laptop.append("c1", user("from the laptop"))
        got = await container.request("chatHistory/get", {"conversationId": "c1"})
        assert [m["content"] for m in got["messages"]] == ["from the laptop"]
        await container.append("c1", {"role": "assistant", "content": "from the container"})
        first = stored["messages"][0]["id"]
        await laptop.request(
            "chatHistory/editMessage", {"conversationId": "c1", "id": first, "content": "edited"}
        )
        await laptop.request("chatHistory/saveSummary", {"conversationId": "c1", "summary": "s"})
        got = await container.request("chatHistory/get", {"conversationId": "c1"})
        assert [m["content"] for m in got["messages"]] == ["edited", "from the container"]
        assert got["summary"]["summary"] == "s"
        await container.request("chatHistory/clear", {"conversationId": "c1"})
        got = await laptop.request("chatHistory/get", {"conversationId": "c1"})
        assert got["messages"] == [] and got["summary"] is None
    finally:
        databases.drop()
