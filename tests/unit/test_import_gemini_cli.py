"""The Gemini CLI reader (importers/gemini_cli.py) over fixtures in the shapes of both formats
(tests/fixtures/imports/SOURCES.md): the older whole-file session JSON and the newer JSON-lines
log, replayed as the CLI does (a later record of an id replaces the earlier one, ``$rewindTo``
drops the rewound turn, ``$set`` patches the metadata); rows checked against the files, what
cannot be carried over counted; the service finds a project's files by its hash or by
``projects.json``; every session formats to a body each provider kind's SDK accepts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from provider_rules import violations
from test_import_readers import secrets, skipped
from test_providers_sdk import sdk_problems

from chat_history.importers import gemini_cli
from chat_history.importers.common import Session, timestamp_ms
from chat_history.providers import KINDS, format_body
from chat_history.service import imports

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "gemini-cli"
HASH = hashlib.sha256(b"/home/me/shop").hexdigest()
OLD = ROOT / "tmp" / HASH / "chats" / "session-2025-10-18T14-57-a1b2c3d4.json"
NEW = ROOT / "tmp" / "shop" / "chats" / "session-2026-11-25T08-00-9c8b7a6d.jsonl"


def read(path: Path) -> Session:
    [session] = gemini_cli.read(path.read_bytes(), path.stem)
    return session


def test_the_older_whole_file_json_pairs_each_tool_call_with_its_result() -> None:
    session = read(OLD)
    raw = json.loads(OLD.read_text(encoding="utf-8"))
    assert session.conversation_id == "gemini-cli:" + raw["sessionId"]
    assert session.title == "Which files define the cart?" and session.folder is None
    roles = [(m.role, m.tool_call_id) for m in session.messages]
    call_id = raw["messages"][1]["toolCalls"][0]["id"]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", call_id),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
    ]
    prompt, calling, result, answer, thanks, welcome = session.messages
    assert prompt.content == raw["messages"][0]["content"]
    assert prompt.timestamp == timestamp_ms(raw["messages"][0]["timestamp"])
    [call] = calling.tool_calls
    assert (call.name, call.arguments) == ("glob", {"pattern": "src/**/cart*.ts"})
    response = raw["messages"][1]["toolCalls"][0]["result"][0]["functionResponse"]["response"]
    assert result.content == response["output"]
    assert result.timestamp == timestamp_ms(raw["messages"][1]["toolCalls"][0]["timestamp"])
    assert answer.content == raw["messages"][2]["content"]
    assert (thanks.content, welcome.content) == ("Thanks, that is all.", "You're welcome.")
    assert skipped(session) == {
        ("info message", "a notice of the CLI, not the conversation"): 1,
        ("thought summary", "not signed: no provider would take it back"): 1,
        ("user message", "a command of the CLI, not sent to the model"): 1,
    }


def test_the_newer_log_is_replayed_as_the_cli_does() -> None:
    session = read(NEW)
    lines = [json.loads(line) for line in NEW.read_text(encoding="utf-8").splitlines()[:-1]]
    assert session.session_id == lines[0]["sessionId"]
    assert session.title == "Fix float drift in cart totals"  # from the $set patch
    contents = [m.content for m in session.messages]
    assert "Delete the whole src folder" not in contents  # rewound
    assert "I will not do that without a backup." not in contents
    prompt, reading, read_result, reply, ask, editing, failed = session.messages
    assert prompt.content == "Why is this total wrong?"
    assert [(a.mime_type, a.data) for a in prompt.attachments] == [
        ("image/png", lines[1]["content"][1]["inlineData"]["data"])
    ]
    # g-1 was written twice: the second record (with the result) replaced the first
    assert reading.content == "Let me read the totals."  # its thought part is not text
    assert [c.id for c in reading.tool_calls] == [lines[3]["toolCalls"][0]["id"]]
    assert read_result.content.startswith("export function total(items)")
    assert read_result.tool_call_id == reading.tool_calls[0].id
    assert reply.timestamp == timestamp_ms("2026-11-25T08:00:09.000Z")
    assert ask.content == "Switch the totals to integer cents."
    assert [c.name for c in editing.tool_calls] == ["replace"]  # the cancelled call left out
    assert failed.content == "Error: old_string was not found in the file"
    counts = skipped(session)
    assert counts[("tool call", "no result recorded (cancelled or still running)")] == 1
    assert counts[("line", "not JSON")] == 1  # the truncated last line
    assert counts[("thought part", "not signed: no provider would take it back")] == 1
    assert counts[("warning message", "a notice of the CLI, not the conversation")] == 1


def test_a_rewind_to_an_unknown_id_drops_every_message_and_set_messages_replaces_them() -> None:
    meta = {"sessionId": "s1", "projectHash": "h"}
    user = {"id": "a", "timestamp": "2026-01-01T00:00:00Z", "type": "user", "content": "one"}
    later = {**user, "id": "b", "content": "two"}
    log = [meta, user, {"$rewindTo": "zzz"}, later]
    data = "\n".join(json.dumps(x) for x in log).encode()
    [session] = gemini_cli.read(data, "f")
    assert [m.content for m in session.messages] == ["two"]
    log = [meta, user, {"$set": {"messages": [later]}}]
    [session] = gemini_cli.read("\n".join(json.dumps(x) for x in log).encode(), "f")
    assert [m.content for m in session.messages] == ["two"]


def test_a_file_of_another_source_yields_nothing() -> None:
    claude = ROOT.parent / "claude-code" / "-home-me-shop"
    for path in claude.glob("*.jsonl"):
        assert gemini_cli.read(path.read_bytes(), "x") == []
    assert gemini_cli.read(b'{"not": "a session"}', "x") == []


def test_the_service_finds_a_projects_files_by_hash_and_by_projects_json(tmp_path: Path) -> None:
    tmp = ROOT / "tmp"
    found = gemini_cli.IMPORTER.session_files(tmp, "/home/me/shop")
    assert found == sorted([OLD, NEW])
    assert gemini_cli.IMPORTER.session_files(tmp, "/elsewhere") == []
    sessions = list(imports.sessions_of("gemini-cli", tmp, "/home/me/shop"))
    assert {s.folder for _, s in sessions} == {"/home/me/shop"}
    # read from a path: projects.json names the folder of a named project's files
    [(_, named)] = imports.sessions_of("gemini-cli", NEW, None)
    assert named.folder == "/home/me/shop"
    [(_, hashed)] = imports.sessions_of("gemini-cli", OLD, None)
    assert hashed.folder == "/home/me/shop"  # the folder of projects.json whose hash it is
    lone = tmp_path / "tmp" / HASH / "chats"
    lone.mkdir(parents=True)
    (lone / OLD.name).write_bytes(OLD.read_bytes())
    [(_, unknown)] = imports.sessions_of("gemini-cli", lone / OLD.name, None)
    assert unknown.folder is None  # no projects.json: a hash names no folder (--workspace)
    # run from the project: the current folder whose SHA-256 is the project's hash, as the CLI
    # hashes its own folder
    here = "/home/me/shop"
    [(_, matched)] = imports.sessions_of("gemini-cli", lone / OLD.name, None, here=here)
    assert matched.folder == here
    [(_, other)] = imports.sessions_of("gemini-cli", lone / OLD.name, None, here="/home/me/x")
    assert other.folder is None  # another project's file: the current folder is only a default
    env = {"HOME": str(tmp_path), "GEMINI_CLI_HOME": ""}
    assert imports.data_folder("gemini-cli", env) == tmp_path / ".gemini" / "tmp"


SESSIONS = {path.name: read(path) for path in (OLD, NEW)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_gemini_session_formats_to_a_body_each_provider_accepts(kind: str, name: str) -> None:
    session = SESSIONS[name]
    body = format_body(kind, list(session.messages))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    assert all(not secrets(m.provider_data) for m in session.messages)  # nothing signed
