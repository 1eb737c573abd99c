"""The Copilot CLI reader (importers/copilot_cli.py) over session event logs written in the
CLI's event shapes (tests/fixtures/imports/SOURCES.md): requests paired with their completions
(a failure as ``Error: …``), a call the reply did not list adopted from its start event, a
request never completed taken out of its reply, ephemeral, turn and sub-agent events counted;
the older single-file sessions (``history-session-state``) read from their ``chatMessages`` at
their timeline's times, with the same pairing rules, and from the timeline alone when their
``chatMessages`` is empty; every session formats to a body each
provider kind's SDK accepts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from import_fixtures import manager
from test_import_readers import assert_every_provider_accepts, skipped

from chat_history.errors import InvalidParams
from chat_history.importers import copilot_cli
from chat_history.importers.common import Session, timestamp_ms
from chat_history.providers import KINDS
from chat_history.service import imports
from chat_history.service.manager import ChatHistoryManager

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "copilot-cli"
STATE = HOME / "session-state"
OLDER = HOME / "history-session-state"
FIRST = "8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d"
SECOND = "1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"
SINGLE = "4d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09"
SINGLE_FILE = OLDER / f"session_{SINGLE}_1760000100000.json"
TIMELINE = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
TIMELINE_FILE = HOME / "timeline-only" / f"session_{TIMELINE}_1759250400000.json"


__all__ = ["manager"]  # the fixture, imported for pytest


def sessions() -> dict[str, Session]:
    return {s.session_id: s for _, s in imports.sessions_of("copilot-cli", HOME, None)}


def test_requests_are_paired_with_their_completions() -> None:
    session = sessions()[FIRST]
    assert (session.folder, session.title) == ("/home/me/shop", "List the failing tests.")
    prompt, running, ran, refused, answer = session.messages
    assert prompt.content == "List the failing tests."  # not the CLI's transformed content
    assert prompt.timestamp == timestamp_ms("2026-11-28T09:00:01.000Z")
    assert [(c.id, c.name, c.arguments) for c in running.tool_calls] == [
        ("call_cli1", "bash", {"command": "npm test", "description": "Run tests"}),
        ("call_cli2", "view", {"path": "/home/me/shop/package.json"}),  # a JSON string parsed
    ]
    assert (ran.tool_call_id, ran.content) == ("call_cli1", "2 failing: cart totals, discount code")
    assert (refused.tool_call_id, refused.content) == (
        "call_cli2",
        "Error: Permission denied by the user",
    )
    assert answer.content == "Two tests fail: cart totals and the discount code."
    counts = skipped(session)
    assert counts[("ephemeral event", "a live update, not the record")] == 2
    assert counts[("tool result", "no tool call before it")] == 1
    assert counts[("assistant.turn_start event", "not a message")] == 1


def test_an_unlisted_call_is_adopted_and_a_request_never_completed_is_dropped() -> None:
    session = sessions()[SECOND]
    prompt, opening, viewed, run, stop = session.messages
    assert [(c.id, c.name) for c in opening.tool_calls] == [("call_v1", "view")]
    assert viewed.tool_call_id == "call_v1"
    assert run.content == "I'll run it." and run.tool_calls == ()  # call_r1 never completed
    assert stop.content == "Stop, I'll do it myself."
    counts = skipped(session)
    assert counts[("tool request", "never completed")] == 1
    assert counts[("user.message event", "a sub-agent's, inside a tool call")] == 1
    assert counts[("line", "not JSON")] == 1
    assert prompt.content == "Fix the discount test."


def test_a_project_chooses_its_sessions_by_cwd_and_other_files_yield_nothing() -> None:
    assert len(list(imports.sessions_of("copilot-cli", STATE, "/home/me/shop"))) == 2
    assert list(imports.sessions_of("copilot-cli", STATE, "/elsewhere")) == []
    claude = STATE.parents[1] / "claude-code" / "-home-me-shop"
    for path in claude.glob("*.jsonl"):
        assert copilot_cli.read(path.read_bytes(), "x") == []


def test_an_older_single_file_session_reads_its_chat_messages_at_its_timeline_times() -> None:
    session = sessions()[SINGLE]
    assert (session.folder, session.title) == (None, "Why does the cart badge show 0 after login?")
    rows = session.messages
    assert [(m.role, m.tool_call_id) for m in rows] == [
        ("user", None),
        ("assistant", None),
        ("tool", "toolu_hist1"),
        ("tool", "toolu_hist2"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
        ("tool", "toolu_hist3"),
        ("user", None),  # the call never answered (toolu_hist4) is gone with its empty reply
    ]
    prompt, looking, viewed, grepped, found, fix, editing, edited, stop = rows
    assert prompt.content == "Why does the cart badge show 0 after login?"
    assert [(c.id, c.name, c.arguments) for c in looking.tool_calls] == [
        (
            "toolu_hist1",
            "str_replace_editor",
            {"command": "view", "path": "/home/me/shop/src/CartBadge.tsx"},
        ),
        (
            "toolu_hist2",
            "bash",
            {"command": "grep -rn CartBadge src", "description": "Find its uses"},
        ),
    ]
    assert viewed.content == "const count = useCart().items.length"
    assert grepped.content == "src/Header.tsx:12: <CartBadge />"
    assert found.content.startswith("The badge reads the cart before the session")
    assert editing.content == "" and editing.tool_calls[0].arguments["new_str"] == (
        "useCart({ waitForSession: true })"
    )
    assert stop.content == "Stop there, I'll run the tests myself."
    at = {
        m: timestamp_ms(f"2025-10-09T08:{t}Z")
        for m, t in (
            (prompt, "15:04.000"),
            (looking, "15:09.000"),  # its timeline "copilot" entry
            (viewed, "15:10.000"),  # its call's completion
            (grepped, "15:11.500"),
            (found, "15:16.000"),
            (fix, "16:02.000"),
            (editing, "16:07.000"),  # no text: its call's request
            (edited, "16:08.000"),
            (stop, "16:20.000"),
        )
    }
    assert {m: m.timestamp for m in rows} == at
    assert skipped(session) == {
        ("system message", "the CLI's instructions, not the conversation"): 1,
        ("chat message", "not a message of a known role"): 1,
        ("tool result", "no tool call before it"): 1,
        ("tool request", "never completed"): 1,
    }


def test_an_older_file_without_a_timeline_or_its_id_takes_the_start_time_and_its_name(
    tmp_path: Path,
) -> None:
    value = json.loads(SINGLE_FILE.read_text())
    del value["timeline"], value["sessionId"]
    path = tmp_path / "history-session-state" / "session_0aa0-11_1760000200000.json"
    path.parent.mkdir()
    path.write_text(json.dumps(value))
    [(_, session)] = imports.sessions_of("copilot-cli", path, None)
    assert session.session_id == "0aa0-11"  # the id in the file's name, not its time
    start = timestamp_ms("2025-10-09T08:15:00.000Z")
    assert {m.timestamp for m in session.messages} == {start}
    cut = SINGLE_FILE.read_bytes()[:-200]  # a file cut short: nothing, and nothing raised
    assert copilot_cli.read(cut, SINGLE) == []


def test_an_older_file_whose_chat_messages_are_empty_is_read_from_its_timeline() -> None:
    [(_, session)] = imports.sessions_of("copilot-cli", TIMELINE_FILE, None)
    assert (session.session_id, session.folder) == (TIMELINE, None)
    assert session.title == "List the failing tests in the checkout package."
    at = timestamp_ms
    rows = [(m.role, m.content, m.tool_call_id, m.timestamp) for m in session.messages]
    assert rows == [
        (
            "user",
            "List the failing tests in the checkout package.",
            None,
            at("2025-09-30T16:40:03Z"),
        ),
        ("assistant", "I'll run the checkout tests.", None, at("2025-09-30T16:40:06Z")),
        ("tool", "2 failing: date.test.ts, total.test.ts", "toolu_tl1", at("2025-09-30T16:40:21Z")),
        (
            "assistant",
            "Two tests fail: date.test.ts and total.test.ts.",
            None,
            at("2025-09-30T16:40:25Z"),
        ),
        ("user", "Show me the date test.", None, at("2025-09-30T16:41:10Z")),
        ("assistant", "", None, at("2025-09-30T16:41:13Z")),  # the first call's request
        ("tool", "expect(format(d)).toBe('30/09/2025')", "toolu_tl2", at("2025-09-30T16:41:14Z")),
        (
            "tool",
            "Error: cat: tests/helpers/date.ts: No such file or directory",
            "toolu_tl3",
            at("2025-09-30T16:41:15.500Z"),
        ),
        (
            "assistant",
            "The test expects a day-first date, but format() writes the month first.",
            None,
            at("2025-09-30T16:41:20Z"),
        ),
    ]
    calls = [[(c.id, c.name, c.arguments) for c in m.tool_calls] for m in session.messages]
    assert calls[1] == [
        (
            "toolu_tl1",
            "bash",
            {"command": "npm test -- checkout", "description": "Run the checkout tests"},
        )
    ]
    assert calls[5] == [
        (
            "toolu_tl2",
            "str_replace_editor",
            {"command": "view", "path": "/home/me/shop/tests/date.test.ts"},
        ),
        (
            "toolu_tl3",
            "bash",
            {"command": "cat tests/helpers/date.ts", "description": "Show the helper"},
        ),
    ]
    assert skipped(session) == {
        ("info entry", "not a message"): 2,
        ("tool request", "never completed"): 1,
    }


def test_older_files_record_no_folder_and_a_session_in_both_is_read_from_its_event_log(
    tmp_path: Path,
) -> None:
    assert SINGLE not in {
        s.session_id for _, s in imports.sessions_of("copilot-cli", HOME, "/home/me/shop")
    }
    with pytest.raises(InvalidParams) as caught:
        imports.workspace_of(sessions()[SINGLE], None)
    assert caught.value.field == "workspace"
    home = tmp_path / ".copilot"
    shutil.copytree(HOME, home)
    twin = json.loads(SINGLE_FILE.read_text()) | {"sessionId": FIRST}
    (home / "history-session-state" / f"session_{FIRST}_1.json").write_text(json.dumps(twin))
    found = [(p.name, s.session_id) for p, s in imports.sessions_of("copilot-cli", home, None)]
    assert sorted(found) == sorted(
        [("events.jsonl", FIRST), ("events.jsonl", SECOND), (SINGLE_FILE.name, SINGLE)]
    )
    assert imports.data_folder("copilot-cli", {"HOME": "/h"}) == Path("/h/.copilot")
    assert imports.data_folder("copilot-cli", {"HOME": "/h", "COPILOT_HOME": "/c"}) == Path("/c")


def test_importing_an_older_file_again_adds_nothing(manager: ChatHistoryManager) -> None:
    runs = [
        imports.import_sessions(
            manager, imports.sessions_of("copilot-cli", OLDER, None), "file:///w", dry_run=False
        )
        for _ in range(2)
    ]
    [(first,), (second,)] = runs
    assert (first.status, first.new_messages) == ("new", 9)
    assert (second.status, second.new_messages) == ("unchanged", 0)
    assert first.conversation_id == f"copilot-cli:{SINGLE}"


SESSIONS = sessions() | {
    s.session_id: s for _, s in imports.sessions_of("copilot-cli", TIMELINE_FILE, None)
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_copilot_cli_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str
) -> None:
    assert_every_provider_accepts(kind, SESSIONS[name])
