"""The VS Code chat sessions reader (importers/copilot_chat.py) over fixtures in the shapes of
both formats (tests/fixtures/imports/SOURCES.md): the older whole-file JSON and the newer
object-mutation log, replayed in order (set, push, cut-then-push, delete); Copilot's tool call
rounds paired with their results; rows checked against the files, what cannot be carried over
counted; the service finds a folder's sessions through ``workspace.json``; every session
formats to a body each provider kind's SDK accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from provider_rules import violations
from test_import_readers import skipped
from test_providers_sdk import sdk_problems

from chat_history.importers import copilot_chat
from chat_history.importers.common import Session
from chat_history.providers import KINDS, format_body
from chat_history.service import imports

STORAGE = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "copilot-chat"
WORKSPACE = STORAGE / "workspaceStorage" / "5d41402abc4b2a76b9719d911017c592"
OLD = WORKSPACE / "chatSessions" / "6c1f0d2e-7a8b-4c9d-8e0f-1a2b3c4d5e6f.json"
NEW = WORKSPACE / "chatSessions" / "8e7d6c5b-4a39-4281-9f70-6e5d4c3b2a19.jsonl"


def read(path: Path) -> Session:
    [session] = copilot_chat.read(path.read_bytes(), path.stem)
    return session


def test_the_whole_file_json_gives_each_request_its_reply_and_tool_rounds() -> None:
    session = read(OLD)
    raw = json.loads(OLD.read_text(encoding="utf-8"))
    first, second = raw["requests"]
    assert session.conversation_id == "copilot-chat:" + raw["sessionId"]
    assert session.title == raw["customTitle"] and session.folder is None
    rows = session.messages
    assert [(m.role, m.tool_call_id) for m in rows] == [
        ("user", None),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
        ("tool", "toolu_vrtx_01__vscode-1"),
        ("assistant", None),
    ]
    assert rows[0].content == first["message"]["text"] and rows[0].timestamp == first["timestamp"]
    assert rows[1].content == "It folds the cart's line items into a total."
    rounds = second["result"]["metadata"]["toolCallRounds"]
    [call] = rows[3].tool_calls
    assert rows[3].content == rounds[0]["response"]
    assert (call.name, call.arguments) == (
        "copilot_findTextInFiles",
        json.loads(rounds[0]["toolCalls"][0]["arguments"]),
    )
    result = second["result"]["metadata"]["toolCallResults"][call.id]["content"][0]["value"]
    assert rows[4].content == result
    assert rows[5].content == rounds[1]["response"]  # the final round, not the panel's parts too
    assert all(m.timestamp == second["timestamp"] for m in rows[2:])
    assert skipped(session) == {
        ("attached context", "a reference to the editor's files, not kept"): 1,
        ("inlineReference part", "shown by the panel, not text of the reply"): 1,
    }


def test_the_mutation_log_is_replayed_in_order() -> None:
    session = read(NEW)
    assert session.session_id == "8e7d6c5b-4a39-4281-9f70-6e5d4c3b2a19"
    assert session.title == "Cents in LineItem"  # set by a later entry
    contents = [m.content for m in session.messages]
    assert "Undo that, use a Money type." not in contents  # cut by a push with i = 1
    prompt, reading, read_out, editing, edited, done, tests = session.messages
    assert prompt.content == "Add a cents field to LineItem." and prompt.timestamp == 1795600000000
    assert reading.tool_calls[0].arguments == {
        "filePath": "/home/me/shop/src/types.ts",
        "startLine": 1,
        "endLine": 40,
    }
    assert read_out.content.startswith("export interface LineItem")
    # the round's call whose arguments are not JSON is left out; its sibling stays paired
    assert [c.name for c in editing.tool_calls] == ["insert_edit_into_file"]
    assert edited.tool_call_id == editing.tool_calls[0].id
    assert done.content == "LineItem now has a `cents` field."
    assert tests.content == "Run the tests." and tests.role == "user"
    counts = skipped(session)
    assert counts[("reply", "empty (cancelled or failed)")] == 1
    assert counts[("tool call", "no id, no JSON arguments or no recorded result")] == 1
    assert counts[("log entry", "its path is not in the session")] == 1
    assert counts[("log entry", "not a change of a session this reader knows")] == 1
    assert counts[("line", "not JSON")] == 1  # the truncated last line


def test_a_file_of_another_source_yields_nothing() -> None:
    claude = STORAGE.parent / "claude-code" / "-home-me-shop"
    for path in claude.glob("*.jsonl"):
        assert copilot_chat.read(path.read_bytes(), "x") == []
    gemini = next((STORAGE.parent / "gemini-cli").rglob("*.json"))
    assert copilot_chat.read(gemini.read_bytes(), "x") == []


def test_the_service_finds_a_folders_sessions_through_workspace_json(tmp_path: Path) -> None:
    storage = STORAGE / "workspaceStorage"
    assert copilot_chat.IMPORTER.session_files(storage, "/home/me/shop") == [OLD, NEW]
    assert copilot_chat.IMPORTER.session_files(storage, "/elsewhere") == []
    placed = {s.folder for _, s in imports.sessions_of("copilot-chat", NEW, None)}
    assert placed == {"file:///home/me/shop"}
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""}
    folder = imports.data_folder("copilot-chat", env)
    assert folder.name == "workspaceStorage" and folder.parent.name == "User"


SESSIONS = {path.name: read(path) for path in (OLD, NEW)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_chat_session_formats_to_a_body_each_provider_accepts(kind: str, name: str) -> None:
    body = format_body(kind, list(SESSIONS[name].messages))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
