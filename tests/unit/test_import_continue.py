"""The Continue reader (importers/continue_dev.py) over fixtures in the shapes of an older and a
newer session file (tests/fixtures/imports/SOURCES.md): results from ``tool`` messages, or from
``toolCallState(s)`` in builds that kept them there; signed thinking kept for Anthropic only;
a call without a result taken out of its reply; every row at the session's ``dateCreated``
from ``sessions.json`` (no message records its time), else its own, else the file's time at its
first import; a project's sessions chosen by their
``workspaceDirectory``; every session formats to a body each provider kind's SDK accepts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from import_fixtures import manager
from test_import_readers import assert_every_provider_accepts, skipped

from chat_history.importers import continue_dev
from chat_history.importers.common import Session
from chat_history.model import Key
from chat_history.providers import KINDS
from chat_history.service import history, imports
from chat_history.service.manager import ChatHistoryManager

SESSIONS_DIR = (
    Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "continue" / "sessions"
)
OLD = SESSIONS_DIR / "3b9e2f10-6c4d-4e8a-9b1f-2d3c4e5f6a7b.json"
NEW = SESSIONS_DIR / "d4c3b2a1-0f9e-4d8c-b7a6-958473625140.json"


__all__ = ["manager"]  # the fixture, imported for pytest


def placed(path: Path) -> Session:
    [(_, session)] = imports.sessions_of("continue", path, None)
    return session


def test_an_older_session_takes_its_results_from_the_tool_call_state() -> None:
    session = placed(OLD)
    raw = json.loads(OLD.read_text(encoding="utf-8"))
    assert session.conversation_id == "continue:" + raw["sessionId"]
    assert (session.title, session.folder) == (raw["title"], "/home/me/shop")
    rows = session.messages
    assert [(m.role, m.tool_call_id) for m in rows] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_k1"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
    ]
    [call] = rows[1].tool_calls
    assert (call.name, call.arguments) == ("builtin_read_file", {"filepath": "tests/cart.spec.ts"})
    assert rows[2].content == raw["history"][1]["toolCallState"]["output"][0]["content"]
    assert rows[4].content == "And this stack trace?"
    assert [(a.mime_type, a.data) for a in rows[4].attachments] == [
        ("image/png", "iVBORw0KGgoAAAANSUhEUgAAAAE=")
    ]
    assert {m.timestamp for m in rows} == {1790000000000}  # sessions.json's dateCreated
    assert skipped(session) == {
        ("image", "a link, not inline data"): 1,
        ("context item", "the editor's files given with a prompt"): 1,
    }


def test_a_newer_session_keeps_signed_thinking_and_drops_a_call_without_result() -> None:
    session = placed(NEW)
    assert session.folder == "file:///home/me/shop"
    assert session.title == "Rename total() to cartTotal() everywhere."  # "New Session" is none
    prompt, calling, found, answer = session.messages
    assert prompt.content == "Rename total() to cartTotal() everywhere."
    assert [c.id for c in calling.tool_calls] == ["toolu_c1"]  # the cancelled toolu_c2 is out
    assert calling.provider_data == {
        "anthropic": {
            "thinking": [
                {
                    "type": "thinking",
                    "thinking": "Search first, then edit each caller.",
                    "signature": "ErUBCkYICBgCIkDcontinueSig",
                }
            ]
        }
    }
    assert found.tool_call_id == "toolu_c1" and found.content.startswith("src/cart.ts:3:")
    assert answer.content.startswith("Two places call total()")
    assert {m.timestamp for m in session.messages} == {1795700000000}
    counts = skipped(session)
    assert counts[("tool call", "no result recorded")] == 1
    assert counts[("tool result", "no tool call before it")] == 1
    assert counts[("thinking message", "no signature: no provider would take it back")] == 1
    assert counts[("system message", "not carried over")] == 1


def test_a_project_chooses_its_sessions_by_workspace_directory_in_either_spelling() -> None:
    both = [s.session_id for _, s in imports.sessions_of("continue", SESSIONS_DIR, "/home/me/shop")]
    assert sorted(both) == sorted([OLD.stem, NEW.stem])
    assert list(imports.sessions_of("continue", SESSIONS_DIR, "/home/me/other")) == []


def test_a_session_without_sessions_json_takes_its_own_time_else_its_files(
    tmp_path: Path, manager: ChatHistoryManager
) -> None:
    """Continue's CLI keeps no ``sessions.json``: the session's own ``dateCreated``, else the
    file's modification time at its first import, which a later import keeps (so a session
    that grew adds only its tail, never a second copy)."""
    lone = tmp_path / NEW.name
    value = json.loads(NEW.read_text())
    lone.write_text(json.dumps(value))
    first_seen = 1_790_000_000
    os.utime(lone, (first_seen, first_seen))

    def run() -> imports.PlannedImport:
        found = imports.sessions_of("continue", lone, None)
        [entry] = imports.import_sessions(manager, found, None, dry_run=False)
        return entry

    first = run()
    key = Key("file:///home/me/shop", first.conversation_id)
    assert (first.status, first.oldest) == ("new", first_seen * 1000)
    stored = history.get(manager, key).messages
    assert {m.timestamp for m in stored} == {first_seen * 1000}
    value["history"].append({"message": {"role": "user", "content": "And the other one?"}})
    lone.write_text(json.dumps(value))
    os.utime(lone, (first_seen + 3_600, first_seen + 3_600))
    grown = run()
    assert (grown.status, grown.new_messages) == ("updated", 1)
    after = history.get(manager, key).messages
    assert len(after) == len(stored) + 1 and {m.timestamp for m in after} == {first_seen * 1000}
    dated = tmp_path / "dated" / NEW.name
    dated.parent.mkdir()
    dated.write_text(json.dumps(value | {"dateCreated": "1795711111000"}))
    [(_, session)] = imports.sessions_of("continue", dated, None)
    assert {m.timestamp for m in session.messages} == {1_795_711_111_000}


def test_a_file_of_another_source_yields_nothing() -> None:
    other = SESSIONS_DIR.parents[1] / "copilot-chat"
    for path in other.rglob("*.json"):
        assert continue_dev.read(path.read_bytes(), "x") == []
    assert continue_dev.read(b"\xff not json", "x") == []


SESSIONS = {path.name: placed(path) for path in (OLD, NEW)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_continue_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str
) -> None:
    session = SESSIONS[name]
    assert_every_provider_accepts(kind, session)
