"""Workspace identity under old, odd and hostile input (issue 35: 5, 9, 10, 12), over real server
processes on both engines: two pre-version-3 spellings of one folder holding one conversation id,
every spelling of one local folder (``..``, ``.``, ``//``, encodings, a symlink), hostile ``.git``
files, and identities over the length bound (refused at ``initialize`` naming the field; the
longest accepted one exports and imports)."""

from __future__ import annotations

import asyncio
import os
import random
import string
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException
from tests.conftest import Databases
from tests.e2e.conftest import Session, StartSession
from tests.e2e.rawclient import StdioClient
from tests.e2e.test_cli import run
from tests.e2e.test_workspaces import folder, open_store, titles, user

from chat_history.model import Message
from chat_history.policy.identity import MAX_IDENTITY_BYTES
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Key

pytestmark = pytest.mark.engines


def write_v2(storage: Path, databases: Databases | None, *keys: tuple[str, str, str]) -> None:
    """What a version-2 server stored: the raw URI as the key (written through the store, as
    today's requests are normalized)."""
    manager = ChatHistoryManager(open_store(storage, databases))
    for workspace, conversation, text in keys:
        history.append(manager, Key(workspace, conversation), [Message(role="user", content=text)])
    manager.close()


async def contents(session: Session, workspace: str, conversation: str) -> list[str]:
    got = await session.request(
        "chatHistory/get", {"conversationId": conversation, "workspace": workspace}
    )
    return [m["content"] for m in got["messages"]]


async def listed_pairs(session: Session) -> set[tuple[str, str]]:
    listed = await session.request("chatHistory/listConversations", {"allWorkspaces": True})
    return {(c["workspace"], c["conversationId"]) for c in listed["conversations"]}


async def logged(session: Session, text: str) -> list[str]:
    for _ in range(200):  # the log line may follow the answer that caused it
        found = [m.message for m in session.client.log_messages if text in m.message]
        if found:
            return found
        await asyncio.sleep(0.01)
    return []


async def test_two_old_spellings_with_one_conversation_id_stay_reachable_as_listed(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    """Issue 35 item 5: both histories stay, each reachable by exactly the key listed; ``clear``,
    ``get`` and ``moveWorkspace`` under a listed key act on the listed history."""
    storage = tmp_path / "store"
    write_v2(
        storage,
        databases,
        ("file:///c%3A/proj", "main", "written by VS Code"),
        ("file:///C:/proj/", "main", "written by Neovim"),
    )
    session = await start_session(storage=storage)  # no folder: the old keys are re-keyed anyway
    pairs = await listed_pairs(session)
    assert pairs == {("file:///c:/proj", "main"), ("file:///c:/proj", "main (moved)")}
    seen = {pair: await contents(session, *pair) for pair in pairs}
    assert sorted(seen.values()) == [["written by Neovim"], ["written by VS Code"]]
    assert await logged(session, "'main' is now 'main (moved)'")
    renamed = ("file:///c:/proj", "main (moved)")
    cleared = await session.request(
        "chatHistory/clear", {"workspace": renamed[0], "conversationId": renamed[1]}
    )
    assert cleared == {"deletedMessages": 1}
    assert await contents(session, "file:///c:/proj", "main") == seen[("file:///c:/proj", "main")]
    assert await listed_pairs(session) == {("file:///c:/proj", "main")}
    moved = await session.request(
        "chatHistory/moveWorkspace", {"from": "file:///C:/proj/", "to": "file:///d:/proj"}
    )
    assert moved == {"conversations": 1}
    assert await contents(session, "file:///d:/proj", "main") == seen[("file:///c:/proj", "main")]


async def test_a_folder_session_takes_both_old_spellings_and_names_the_new_id(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    storage = tmp_path / "store"
    write_v2(
        storage,
        databases,
        ("file:///c%3A/proj", "main", "one"),
        ("file:///C:/proj/", "main", "two"),
        ("file:///C:/proj/", "other", "three"),
    )
    session = await start_session(storage=storage, workspace_folders=folder("file:///c%3A/proj"))
    assert await titles(session) == ["main", "main (moved)", "other"]
    both = await contents(session, "file:///c:/proj", "main") + await contents(
        session, "file:///c:/proj", "main (moved)"
    )
    assert sorted(both) == ["one", "two"]
    workspaces = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    assert [(w["workspace"], w["conversations"]) for w in workspaces] == [("file:///c:/proj", 3)]


async def test_every_spelling_of_one_local_folder_is_one_history(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    """Issue 35 item 9: ``..``, ``.``, ``//``, a space and ``é`` as they are or encoded, and a
    symlink to the folder all name one history; what a version-2 server stored under a raw
    spelling is re-keyed on opening."""
    proj = tmp_path / "my proj" / "café"
    proj.mkdir(parents=True)
    (tmp_path / "other").mkdir()
    link = tmp_path / "link"
    link.symlink_to(proj, target_is_directory=True)
    storage = tmp_path / "store"
    write_v2(storage, databases, (f"file://{proj}/", "old", "stored by version 2"))
    first = await start_session(storage=storage, workspace_folders=folder(proj.as_uri()))
    await first.append("c1", user("written once"))
    base = f"file://{tmp_path}"
    for spelling in (
        f"{base}/other/../my proj/café",
        f"{base}//my%20proj/./caf%c3%a9/",
        f"{base}/my%20proj/caf%C3%A9/x/..",
        link.as_uri(),
    ):
        session = await start_session(storage=storage, workspace_folders=folder(spelling))
        assert await titles(session) == ["c1", "old"], spelling
        got = await session.request("chatHistory/get", {"conversationId": "c1"})
        assert [m["content"] for m in got["messages"]] == ["written once"]
    assert [w for w, _ in await listed_pairs(first)] == [Path(os.path.realpath(proj)).as_uri()] * 2


async def test_a_symlinked_folder_s_own_history_joins_its_target_s(
    start_session: StartSession, tmp_path: Path
):
    proj = tmp_path / "proj"
    proj.mkdir()
    link = tmp_path / "link"
    link.symlink_to(proj, target_is_directory=True)
    storage = tmp_path / "store"
    via_link = await start_session(
        storage=storage, init_options={"workspace": link.as_uri()}
    )  # an explicit identity is taken as named: the link's own key
    await via_link.append("c1", user("under the link's spelling"))
    session = await start_session(storage=storage, workspace_folders=folder(link.as_uri()))
    assert await titles(session) == ["c1"]
    assert await titles(session, link.as_uri()) == ["c1"]  # the client's spelling names it too
    listed = await listed_pairs(session)
    assert listed == {(proj.resolve().as_uri(), "c1")}


async def test_a_folder_named_by_its_path_is_the_folder_s_history(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    """A workspace named by a path (``rootPath``, or an explicit identity such as
    ``/home/me/proj``) is the folder's URI identity; what was stored under the path before
    joins it, and requests naming the path mean it."""
    proj = tmp_path / "proj"
    proj.mkdir()
    storage = tmp_path / "store"
    write_v2(storage, databases, (str(proj), "old", "stored under the path"))
    by_path = await start_session(storage=storage, init_options={"workspace": str(proj)})
    await by_path.append("c1", user("written by a session named by the path"))
    assert await titles(by_path, str(proj)) == ["c1", "old"]
    by_uri = await start_session(storage=storage, workspace_folders=folder(proj.as_uri()))
    assert await titles(by_uri) == ["c1", "old"]
    assert await listed_pairs(by_uri) == {
        (Path(os.path.realpath(proj)).as_uri(), "c1"),
        (Path(os.path.realpath(proj)).as_uri(), "old"),
    }


def hostile_folders(root: Path) -> dict[str, Path]:
    """Issue 35 item 10's folders: a ``gitdir:`` with a NUL, a gitdir symlink loop, a
    ``commondir`` with undecodable bytes, a remote URL with 200,000 spaces inside."""
    made = {}
    for name in ("nul", "loop", "commondir", "spaces"):
        made[name] = root / name
        made[name].mkdir(parents=True)
    (made["nul"] / ".git").write_bytes(b"gitdir: x\0y\n")
    (made["loop"] / "cycle").symlink_to(made["loop"] / "cycle")
    (made["loop"] / ".git").write_text("gitdir: cycle\n")
    (made["commondir"] / ".git").mkdir()
    (made["commondir"] / ".git" / "commondir").write_bytes(b"\xff\xfe\x80/..\n")
    (made["spaces"] / ".git").mkdir()
    (made["spaces"] / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/o/r' + " " * 200_000 + "x\n"
    )
    return made


@pytest.mark.parametrize("name", ["nul", "loop", "commondir", "spaces"])
async def test_a_hostile_git_folder_answers_every_request_without_a_fingerprint(
    start_session: StartSession, tmp_path: Path, name: str
):
    hostile = hostile_folders(tmp_path / "folders")[name]
    session = await start_session(
        storage=tmp_path / "store",
        workspace_folders=folder(hostile.as_uri()),
        init_options={"workspaceIdentity": "repository"},
    )
    await session.append("c1", user("still answered"))
    got = await session.request("chatHistory/get", {"conversationId": "c1"})
    assert [m["content"] for m in got["messages"]] == ["still answered"]
    workspaces = (await session.request("chatHistory/listWorkspaces", {}))["workspaces"]
    assert workspaces == [
        {
            "workspace": hostile.as_uri(),
            "conversations": 1,
            "lastActivity": workspaces[0]["lastActivity"],
            # a readable repository whose remote is too long: a folder without a remote
            "folder": str(hostile) if name == "spaces" else None,
            "folderExists": True if name == "spaces" else None,
            "repository": None,
            "renamed": [],
        }
    ]


def initialize_raw(tmp_path: Path, **params: Any) -> dict[str, Any]:
    server = StdioClient(tmp_path / "store")
    try:
        return server.call_raw(
            "initialize",
            {
                "processId": None,
                "capabilities": {},
                "initializationOptions": {"storagePath": str(tmp_path / "store")},
                **params,
            },
        )
    finally:
        server.close()


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"workspaceFolders": [{"uri": "file:///" + "d/" * 6_750, "name": "deep"}]}, None),
        ({"rootUri": "file:///" + "é" * 300}, "rootUri"),
        ({"rootPath": "/" + "p" * 5_000}, "rootPath"),
    ],
)
def test_an_identity_over_the_bound_is_refused_at_initialize_naming_the_field(
    tmp_path: Path, params: dict[str, Any], field: str | None
):
    """Issue 35 item 12: a folder URI of 13,508 characters, an explicit identity of 1,000,000,
    a root URI of 1,808 characters once normalized, a root path of 5,001: -32602 naming the
    field, the value never echoed, nothing stored."""
    answer = initialize_raw(tmp_path, **params)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {"field": field or "workspaceFolders[0].uri"}
    assert "d/d/" not in answer["error"]["message"] and "pppp" not in answer["error"]["message"]
    explicit = initialize_raw(
        tmp_path,
        initializationOptions={"storagePath": str(tmp_path / "store"), "workspace": "w" * 10**6},
    )
    assert explicit["error"]["data"] == {"field": "initializationOptions.workspace"}
    assert "www" not in explicit["error"]["message"]
    assert not (tmp_path / "store").exists()  # refused before the store is opened


async def test_the_longest_accepted_identity_exports_and_imports(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    """Every key the server stores comes back from its export: the longest identity (1,536
    bytes once normalized; an encoded name counts as encoded) beside the longest conversation id
    (256 characters of 4 bytes), neither compressible, is accepted at ``initialize`` and by a
    request, stored on both engines, and its export imports into another store."""
    rng = random.Random(35)
    head = "file:///" + "é" * 100 + "/"  # 609 characters once normalized
    longest = head + "".join(rng.choices(string.ascii_letters, k=MAX_IDENTITY_BYTES - 609))
    conversation = "".join(chr(rng.randrange(0x20000, 0x2A6E0)) for _ in range(256))
    storage = tmp_path / "store"
    session = await start_session(storage=storage, init_options={"workspace": longest})
    await session.append(conversation, user("under the longest identity"))
    await session.request(
        "chatHistory/saveSummary", {"conversationId": conversation, "summary": "s"}
    )
    with pytest.raises(JsonRpcException) as caught:
        await session.append("c2", user("one more"), workspace=longest + "y")
    assert caught.value.data == {"field": "workspace"}
    [(workspace, listed)] = await listed_pairs(session)
    assert len(workspace.encode()) == MAX_IDENTITY_BYTES and listed == conversation
    where = {"source": ["--db", str(storage)], "copy": ["--db", str(tmp_path / "copy")]}
    if databases is not None:
        where = {
            name: ["--database", databases.url(tmp_path / folder)]
            for name, folder in (("source", "store"), ("copy", "copy"))
        }
    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(tmp_path / "cli")}
    exported = run(env, *where["source"], "export")
    assert exported.returncode == 0, exported.stderr
    dump = tmp_path / "export.jsonl"
    dump.write_text(exported.stdout, encoding="utf-8")
    imported = run(env, *where["copy"], "import", str(dump))
    assert imported.returncode == 0, imported.stderr
    copy = await start_session(storage=tmp_path / "copy", init_options={"workspace": longest})
    got = await copy.request("chatHistory/get", {"conversationId": conversation})
    assert [m["content"] for m in got["messages"]] == ["under the longest identity"]
    assert got["summary"]["summary"] == "s"
