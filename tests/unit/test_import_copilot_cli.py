"""The Copilot CLI reader (importers/copilot_cli.py) over session event logs written in the
CLI's event shapes (tests/fixtures/imports/SOURCES.md): requests paired with their completions
(a failure as ``Error: …``), a call the reply did not list adopted from its start event, a
request never completed taken out of its reply, ephemeral, turn and sub-agent events counted;
every session formats to a body each provider kind's SDK accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_rules import violations
from test_import_readers import skipped
from test_providers_sdk import sdk_problems

from chat_history.importers import copilot_cli
from chat_history.importers.common import Session, timestamp_ms
from chat_history.providers import KINDS, format_body
from chat_history.service import imports

STATE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "copilot-cli" / "session-state"
)
FIRST = "8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d"
SECOND = "1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"


def sessions() -> dict[str, Session]:
    return {s.session_id: s for _, s in imports.sessions_of("copilot-cli", STATE, None)}


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


SESSIONS = sessions()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_copilot_cli_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str
) -> None:
    body = format_body(kind, list(SESSIONS[name].messages))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
