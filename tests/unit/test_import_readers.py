"""The readers of other tools' history (importers/): each fixture read into rows whose text, tool
pairs, thinking and timestamps are checked against the file; what cannot be carried over is
counted, never fatal; and every imported conversation, prepared for each of the eight provider
kinds, gives a body the provider's SDK types (and mistral-common) accept, with signed thinking
sent only to the provider that signed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from provider_rules import violations
from test_providers_sdk import sdk_problems

from chat_history.importers import IMPORTERS, Session, claude_code, codex
from chat_history.importers.common import MAX_DEPTH, timestamp_ms
from chat_history.providers import KINDS, format_body

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
CLAUDE = FIXTURES / "claude-code" / "-home-me-shop"
NEW = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f"
OLD = "0b9d4e21-aaaa-4bbb-8ccc-123456789abc"
CODEX = FIXTURES / "codex" / "sessions"
CODEX_NEW = "019a6f0e-1d2c-7b3a-9e8d-5c4b3a291807"
CODEX_OLD = "5f2e9a7c-3b1d-4e6f-8a9b-0c1d2e3f4a5b"


def claude(name: str, sid: str) -> list[Session]:
    return claude_code.read((CLAUDE / name).read_bytes(), sid)


def skipped(session: Session) -> dict[tuple[str, str], int]:
    return {(s.what, s.why): s.count for s in session.skipped}


def test_claude_code_merges_a_reply_written_block_per_line_and_pairs_its_tools() -> None:
    [session] = claude(f"{NEW}.jsonl", NEW)
    assert session.conversation_id == f"claude-code:{NEW}"
    assert session.folder == "/home/me/shop"
    assert session.title == "Fix the Safari checkout date test"
    roles = [(m.role, m.tool_call_id) for m in session.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "toolu_01R"),
        ("assistant", None),
        ("tool", "toolu_01E"),
        ("assistant", None),
    ]
    prompt, first, read, edit, edited, last = session.messages
    assert prompt.content == "The checkout test fails on Safari. Here is the screenshot."
    assert [a.mime_type for a in prompt.attachments] == ["image/png"]
    assert prompt.timestamp == timestamp_ms("2026-11-20T09:00:02.000Z")
    # three lines of msg_01A: thinking, text, tool_use → one row
    assert first.content == "Let me read the test first."
    assert [(c.id, c.name) for c in first.tool_calls] == [("toolu_01R", "Read")]
    assert first.tool_calls[0].arguments == {"file_path": "/home/me/shop/tests/checkout.spec.ts"}
    assert first.provider_data == {
        "anthropic": {
            "thinking": [
                {
                    "type": "thinking",
                    "thinking": "The failure is probably the date input.",
                    "signature": "EqQBCkYIBRgCKkBsig1",
                }
            ]
        }
    }
    assert first.timestamp == timestamp_ms("2026-11-20T09:00:05.000Z")
    assert read.content.startswith("test('checkout'")
    assert edit.tool_calls[0].name == "Edit" and edited.content == "The file has been updated."
    assert last.content.startswith("Fixed: the checkout test now types the date")
    counts = skipped(session)
    assert counts[("meta line", "inserted by the tool, not typed by the user")] == 1
    assert counts[("tool result", "no tool call before it")] == 1
    assert counts[("queue-operation line", "not a message")] == 1
    assert counts[("file-history-snapshot line", "not a message")] == 1


def test_claude_code_older_builds_sidechains_become_their_own_conversation() -> None:
    main, side = claude(f"{OLD}.jsonl", OLD)
    assert [m.role for m in main.messages] == ["user", "assistant", "tool", "assistant"]
    assert main.messages[1].tool_calls[0].name == "Task"
    assert main.messages[3].content.startswith("The total uses floats")
    assert main.title == "Why is the cart total off by a cent?"
    assert side.session_id == f"{OLD}/sidechain"
    assert [m.content for m in side.messages] == [
        "Search the code for money computed with floats.",
        "cart.ts line 42 multiplies price * 1.2 as a float.",
    ]
    counts = skipped(main)
    assert counts[("line", "not JSON")] == 1  # the truncated last line
    assert counts[("system line", "not a message")] == 1


def test_a_sub_agent_file_is_a_conversation_named_after_its_session() -> None:
    [session] = claude(f"{NEW}/subagents/agent-a1b2.jsonl", f"{NEW}/agent-a1b2")
    assert session.session_id == f"{NEW}/agent-a1b2"
    assert [m.role for m in session.messages] == ["user", "assistant"]


def test_codex_reads_the_items_once_and_keeps_reasoning_for_the_responses_api() -> None:
    path = CODEX / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{CODEX_NEW}.jsonl"
    [session] = codex.read(path.read_bytes(), codex.session_id_of(path.name))
    assert session.session_id == CODEX_NEW and session.folder == "/home/me/shop"
    assert [(m.role, m.tool_call_id) for m in session.messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_A1"),
        ("assistant", None),
        ("tool", "call_P1"),
        ("assistant", None),
    ]
    prompt, call, output, patch, patched, answer = session.messages
    assert prompt.content == "Add a test for the discount code field."
    assert call.tool_calls[0].name == "shell"
    assert call.tool_calls[0].arguments == {
        "command": ["bash", "-lc", "ls tests"],
        "workdir": "/home/me/shop",
    }
    assert call.provider_data == {}  # its reasoning has no id (newer rollouts): not sendable
    assert "checkout.spec.ts" in output.content
    assert patch.tool_calls[0].name == "apply_patch"
    assert patch.tool_calls[0].arguments["input"].startswith("*** Begin Patch")
    assert "Success" in patched.content
    assert answer.content == "Added tests/discount.spec.ts with a first discount-code test."
    assert answer.timestamp == timestamp_ms("2026-11-20T10:00:12.000Z")
    counts = skipped(session)
    assert counts[("user message", "written by Codex, not typed by the user")] == 2
    assert counts[("developer message", "instructions, not the conversation")] == 1
    assert counts[("event_msg line", "a second copy of the turns (the items are read)")] == 3
    assert counts[("web_search_call item", "not carried over")] == 1
    assert counts[("reasoning item", "no id: the Responses API would refuse it")] == 1


def test_codex_older_rollouts_without_the_envelope() -> None:
    path = CODEX / f"rollout-2025-05-12-{CODEX_OLD}.jsonl"
    [session] = codex.read(path.read_bytes(), codex.session_id_of(path.name))
    assert session.session_id == CODEX_OLD
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[2].content == "src/cart.ts:3:export function cartHelper"
    assert session.folder is None
    [reasoning] = session.messages[1].provider_data["openai-responses"]["reasoning"]
    assert (reasoning["id"], reasoning["encrypted_content"]) == ("rs_1", "gAAAAABoldEncrypted")


@pytest.mark.parametrize("source", sorted(IMPORTERS))
@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"type": "user", "message": {"role": "user", "content": "hi"', "not JSON"),
        (b"\xff\xfe not utf-8\n", "not valid UTF-8"),
        (b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5), f"nested deeper than {MAX_DEPTH}"),
        (b"[1, 2, 3]\n", "not a JSON object"),
    ],
)
def test_malformed_lines_are_counted_never_fatal(source: str, data: bytes, why: str) -> None:
    good = (CLAUDE / f"{NEW}.jsonl").read_bytes() if source == "claude-code" else b""
    sessions = IMPORTERS[source].read(good + b"\n" + data, "s")
    reasons = {s.why for session in sessions for s in session.skipped}
    if sessions:
        assert why in reasons
    else:  # nothing readable at all: no session, nothing raised
        assert IMPORTERS[source].read(data, "s") == []


def test_a_file_of_another_source_yields_nothing_and_says_why() -> None:
    path = CODEX / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{CODEX_NEW}.jsonl"
    assert claude_code.read(path.read_bytes(), "x") == []
    assert codex.read((CLAUDE / f"{NEW}.jsonl").read_bytes(), "x") == []


def every_fixture_session() -> list[tuple[str, Session]]:
    found: list[tuple[str, Session]] = []
    for path in sorted(CLAUDE.rglob("*.jsonl")):
        for session in claude_code.read(path.read_bytes(), path.stem):
            found.append((f"claude-code:{path.name}:{session.session_id}", session))
    for path in sorted(CODEX.rglob("*.jsonl")):
        for session in codex.read(path.read_bytes(), codex.session_id_of(path.name)):
            found.append((f"codex:{path.name}", session))
    return found


SESSIONS = every_fixture_session()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", [name for name, _ in SESSIONS])
def test_every_imported_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str
) -> None:
    assert_every_provider_accepts(kind, dict(SESSIONS)[name])


def assert_every_provider_accepts(kind: str, session: Session) -> None:
    """``session`` formatted for ``kind`` passes the provider's rules and SDK types, and signed
    thinking and encrypted reasoning reach the provider that made them, only (every reader's
    test checks its fixtures with this)."""
    body = format_body(kind, list(session.messages))
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    text = json.dumps(body)
    for message in session.messages:
        for provider, data in message.provider_data.items():
            for secret in secrets(data):
                assert (secret in text) == (provider == kind), (provider, secret)


def secrets(value: object) -> list[str]:
    """The signatures and encrypted contents inside providerData."""
    if isinstance(value, dict):
        return [
            item
            for key, inner in value.items()
            for item in (
                [inner]
                if key in {"signature", "encrypted_content"} and isinstance(inner, str)
                else secrets(inner)
            )
        ]
    if isinstance(value, list):
        return [item for inner in value for item in secrets(inner)]
    return []
