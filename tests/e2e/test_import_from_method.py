"""``chatHistory/importFrom`` over the real server process, on both engines: a dry run by
default (the answer previews, nothing is written), ``dryRun: false`` imports the sessions the
tool recorded for the session's own folder into the session's workspace, importing again adds
nothing, and the method reads nothing outside the tool's data folder (a path elsewhere, a link
out of it, a NUL: -32602 ``path``). Issue 43: a FIFO in the data folder is a warning and the
window keeps answering, a session without a folder goes into the window's workspace (said), and
the user's own conversation of the same id is left alone."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from tests.e2e.conftest import Session, StartSession

from chat_history.importers.claude_code import project_folder_name
from chat_history.importers.common import timestamp_ms

pytestmark = pytest.mark.engines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
SHOP = FIXTURES / "claude-code" / "-home-me-shop"
NEW = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f"
OTHER = "0b9d4e21-aaaa-4bbb-8ccc-123456789abc"


def claude_home(tmp_path: Path) -> tuple[Path, Path]:
    """(a project folder, a HOME whose ~/.claude/projects holds the fixtures' two sessions for
    it, their recorded cwd rewritten to that folder)."""
    project = tmp_path / "work" / "shop"
    project.mkdir(parents=True)
    home = tmp_path / "home"
    store = home / ".claude" / "projects" / project_folder_name(str(project))
    store.mkdir(parents=True)
    for name in (NEW, OTHER):
        text = (SHOP / f"{name}.jsonl").read_text(encoding="utf-8")
        (store / f"{name}.jsonl").write_text(text.replace("/home/me/shop", str(project)))
    return project, home


async def start(
    start_session: StartSession, project: Path, home: Path, settings: Any = None
) -> Session:
    return await start_session(
        settings=settings,
        configuration=settings,
        env={"HOME": str(home), "CLAUDE_CONFIG_DIR": ""},
        workspace_folders=[types.WorkspaceFolder(uri=project.as_uri(), name="shop")],
    )


async def listed(session: Session) -> dict[str, int]:
    page = await session.request("chatHistory/listConversations", {})
    return {c["conversationId"]: c["messageCount"] for c in page["conversations"]}


async def test_a_dry_run_by_default_then_an_import_into_the_sessions_workspace(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    # the fixtures' turns are older than maxAgeHours' default: kept here (see the next test)
    session = await start(start_session, project, home, {"maxAgeHours": 0})
    preview = await session.request("chatHistory/importFrom", {"source": "claude-code"})
    by_id = {c["conversationId"]: c for c in preview["conversations"]}
    first = by_id[f"claude-code:{NEW}"]
    assert first["source"] == "claude-code" and first["sourceId"] == NEW
    assert first["status"] == "new" and first["messages"] == 6 and first["newMessages"] == 6
    assert first["workspace"] == project.as_uri()
    assert first["title"] == "Fix the Safari checkout date test"
    assert {"what": "tool result", "why": "no tool call before it", "count": 1} in first["skipped"]
    assert await listed(session) == {}  # the dry run wrote nothing
    done = await session.request(
        "chatHistory/importFrom", {"source": "claude-code", "dryRun": False}
    )
    assert {c["conversationId"]: c["status"] for c in done["conversations"]} == {
        c: "new" for c in by_id
    }
    found = await listed(session)
    assert found == {c: entry["messages"] for c, entry in by_id.items()}
    got = await session.request("chatHistory/get", {"conversationId": f"claude-code:{NEW}"})
    assert [m["role"] for m in got["messages"]][:2] == ["user", "assistant"]
    again = await session.request(
        "chatHistory/importFrom", {"source": "claude-code", "dryRun": False}
    )
    assert {c["status"] for c in again["conversations"]} == {"unchanged"}
    assert {c["newMessages"] for c in again["conversations"]} == {0}
    assert await listed(session) == found


async def test_the_answer_tells_how_old_the_oldest_turn_is_for_retention_to_be_warned_of(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    session = await start(start_session, project, home)  # maxAgeHours at its default, 720
    params = {"source": "claude-code", "path": str(next(home.glob(f"**/{OTHER}.jsonl")))}
    answer = await session.request("chatHistory/importFrom", params)
    (entry,) = [c for c in answer["conversations"] if c["sourceId"] == OTHER]
    lines = (SHOP / f"{OTHER}.jsonl").read_text(encoding="utf-8").splitlines()
    stamps = [json.loads(line)["timestamp"] for line in lines if '"timestamp"' in line]
    days = (time.time() * 1000 - entry["oldest"]) / 86_400_000
    assert entry["oldest"] in {timestamp_ms(s) for s in stamps} and days > 30
    await session.request("chatHistory/importFrom", {**params, "dryRun": False})
    # the age rule of the user's settings deletes those turns at the next read, as any other's
    got = await session.request("chatHistory/get", {"conversationId": f"claude-code:{OTHER}"})
    assert got["messages"] == []


async def test_the_answer_tells_what_retention_deletes_at_the_next_read(
    start_session: StartSession, tmp_path: Path
) -> None:
    """``retention``: what the session's own retention settings delete of each conversation at
    its next read once imported (the import deletes nothing): exactly what the next read does."""
    project, home = claude_home(tmp_path)
    # an age limit between the two sessions' (7 weeks apart): the older one expires, not the newer
    newer = min(timestamp_ms(s) or 0 for s in stamps_of(NEW))
    hours = (time.time() * 1000 - newer) / 3_600_000 + 24 * 24
    session = await start(start_session, project, home, {"maxAgeHours": hours})
    preview = await session.request("chatHistory/importFrom", {"source": "claude-code"})
    by_id = {c["conversationId"]: c for c in preview["conversations"]}
    assert by_id[f"claude-code:{NEW}"]["retention"] is None
    older = by_id[f"claude-code:{OTHER}"]
    assert older["retention"] == {
        "droppedMessages": older["messages"],
        "droppedTurns": 1,
        "retainedTurns": 0,
        "reasons": ["age"],
    }
    await session.request("chatHistory/importFrom", {"source": "claude-code", "dryRun": False})
    for conversation, entry in by_id.items():
        got = await session.request("chatHistory/get", {"conversationId": conversation})
        dropped = entry["retention"]["droppedMessages"] if entry["retention"] else 0
        assert len(got["messages"]) == entry["messages"] - dropped, conversation
    kept = await start(start_session, project, home, {"maxAgeHours": 0})
    answer = await kept.request("chatHistory/importFrom", {"source": "claude-code"})
    assert {c["retention"] is None for c in answer["conversations"]} == {True}


def stamps_of(session: str) -> list[str]:
    lines = (SHOP / f"{session}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["timestamp"] for line in lines if '"timestamp"' in line]


async def expect_invalid(session: Session, params: dict[str, Any], field: str) -> str:
    with pytest.raises(JsonRpcException) as caught:
        await session.request("chatHistory/importFrom", params)
    assert caught.value.code == -32602
    assert caught.value.data == {"field": field}
    return str(caught.value.message)


async def test_nothing_outside_the_tools_data_folder_is_read(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = outside / f"{NEW}.jsonl"
    secret.write_text((SHOP / f"{NEW}.jsonl").read_text(encoding="utf-8"))
    session = await start(start_session, project, home)
    await expect_invalid(session, {"source": "claude-code", "path": str(secret)}, "path")
    await expect_invalid(session, {"source": "claude-code", "path": "projects/x.jsonl"}, "path")
    await expect_invalid(session, {"source": "notatool"}, "source")
    await expect_invalid(session, {"source": "claude-code", "dryRun": "no"}, "dryRun")
    linked = home / ".claude" / "projects" / "-linked"
    linked.mkdir()
    os.symlink(secret, linked / "link.jsonl")
    message = await expect_invalid(
        session, {"source": "claude-code", "path": str(linked / "link.jsonl")}, "path"
    )
    assert str(secret) not in message
    folder_message = await expect_invalid(
        session, {"source": "claude-code", "path": str(linked), "dryRun": False}, "path"
    )
    assert "links outside the tool's own data folder" in folder_message
    assert await listed(session) == {}
    inside = home / ".claude" / "projects" / project_folder_name(str(project)) / f"{NEW}.jsonl"
    one = await session.request(
        "chatHistory/importFrom",
        {
            "source": "claude-code",
            "path": str(inside),
            "workspace": "file:///else",
            "dryRun": False,
        },
    )
    assert [(c["workspace"], c["status"]) for c in one["conversations"]] == [
        ("file:///else", "new")
    ]


# -- issue 43 (Imports): hostile folders, sessions without a folder, the user's own conversations


async def test_a_nul_in_the_path_is_invalid_params_naming_path(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    session = await start(start_session, project, home)
    inside = home / ".claude" / "projects"
    message = await expect_invalid(
        session, {"source": "claude-code", "path": f"{inside}/a\u0000b.jsonl"}, "path"
    )
    assert "NUL" in message


@pytest.mark.skipif(os.name != "posix", reason="FIFOs are POSIX")
async def test_a_fifo_in_the_data_folder_is_a_warning_and_the_window_keeps_answering(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    store = home / ".claude" / "projects" / project_folder_name(str(project))
    fifo = store / "00000000-fifo.jsonl"
    os.mkfifo(fifo)
    empty = store / "00000001-empty.jsonl"
    empty.write_bytes(b"")
    session = await start(start_session, project, home, {"maxAgeHours": 0})
    try:
        answer = await asyncio.wait_for(
            session.request("chatHistory/importFrom", {"source": "claude-code"}), 15
        )
    except TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the server go on
        pytest.fail("importFrom blocked on a FIFO")
    assert {c["sourceId"] for c in answer["conversations"]} == {NEW, OTHER, f"{OTHER}/sidechain"}
    why = "no message in it that claude-code's reader carries over (empty, or not its session)"
    assert answer["warnings"] == [
        {"path": str(fifo), "why": "a FIFO, not a regular file: not read"},
        {"path": str(empty), "why": why},
    ]
    named = await asyncio.wait_for(
        session.request("chatHistory/importFrom", {"source": "claude-code", "path": str(fifo)}),
        15,
    )
    assert named == {
        "conversations": [],
        "warnings": [{"path": str(fifo), "why": "a FIFO, not a regular file: not read"}],
    }
    assert await listed(session) == {}  # and the window answers its other requests


async def test_a_session_without_a_folder_goes_into_the_windows_workspace_and_says_so(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    copilot = tmp_path / "copilot"
    older = copilot / "history-session-state"
    older.mkdir(parents=True)
    timeline = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
    name = f"session_{timeline}_1759250400000.json"
    (older / name).write_bytes((FIXTURES / "copilot-cli" / "timeline-only" / name).read_bytes())
    session = await start_session(
        settings={"maxAgeHours": 0},
        configuration={"maxAgeHours": 0},
        env={"HOME": str(home), "COPILOT_HOME": str(copilot)},
        workspace_folders=[types.WorkspaceFolder(uri=project.as_uri(), name="shop")],
    )
    params = {"source": "copilot-cli", "path": str(older / name), "dryRun": False}
    answer = await session.request("chatHistory/importFrom", params)
    [entry] = answer["conversations"]
    assert (entry["workspace"], entry["workspaceFrom"], entry["messages"]) == (
        project.as_uri(),
        "current",
        9,
    )
    assert await listed(session) == {f"copilot-cli:{timeline}": 9}


async def test_an_import_goes_beside_the_users_own_conversation_of_the_same_id(
    start_session: StartSession, tmp_path: Path
) -> None:
    project, home = claude_home(tmp_path)
    session = await start(start_session, project, home, {"maxAgeHours": 0})
    await session.append(f"claude-code:{NEW}", {"role": "user", "content": "my own"})
    done = await session.request(
        "chatHistory/importFrom", {"source": "claude-code", "dryRun": False}
    )
    entry = next(c for c in done["conversations"] if c["sourceId"] == NEW)
    assert (entry["conversationId"], entry["status"], entry["beside"]) == (
        f"claude-code:{NEW}~2",
        "new",
        f"claude-code:{NEW}",
    )
    found = await listed(session)
    assert found[f"claude-code:{NEW}"] == 1 and found[f"claude-code:{NEW}~2"] == 6
