"""Imported rows carry their origin (protocol.md "Version 5": an imported row's origin is the
tool's provider and model, with scope ``import:<source>``): each reader stamps its replies where
the tool's provider is known, and the state they carry (Claude Code's signed thinking, Codex's
encrypted reasoning, OpenCode's signed reasoning) then goes back only to a target in that scope,
never to the user's own account or another tool's."""

from __future__ import annotations

import json

import pytest
from test_import_continue import NEW as CONTINUE_NEW
from test_import_continue import OLD as CONTINUE_OLD
from test_import_continue import placed as continue_session
from test_import_gemini_cli import NEW as GEMINI_NEW
from test_import_gemini_cli import OLD as GEMINI_OLD
from test_import_gemini_cli import read as gemini_session
from test_import_opencode import MAIN, sessions
from test_import_readers import CODEX, CODEX_NEW, CODEX_OLD, NEW, claude, secrets

from chat_history.importers import codex
from chat_history.importers.common import Session
from chat_history.model import Message, Origin
from chat_history.policy.budget import Route
from chat_history.policy.origins import PUBLIC_ENDPOINTS
from chat_history.providers import format_body
from chat_history.providers.state_rules import Target


def replies(session: Session) -> list[Message]:
    return [m for m in session.messages if m.role == "assistant"]


def stamped(kind: str, model: str | None, source: str) -> Origin:
    return Origin(
        provider=kind, model=model, endpoint=PUBLIC_ENDPOINTS[kind], scope=f"import:{source}"
    )


def codex_session() -> Session:
    path = CODEX / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{CODEX_NEW}.jsonl"
    [session] = codex.read(path.read_bytes(), codex.session_id_of(path.name))
    return session


def codex_older() -> Session:
    """An older rollout: its reasoning items have ids (sendable), and no turn names a model."""
    path = CODEX / f"rollout-2025-05-12-{CODEX_OLD}.jsonl"
    [session] = codex.read(path.read_bytes(), codex.session_id_of(path.name))
    return session


def test_each_reader_stamps_its_replies_with_the_tools_provider_and_model() -> None:
    [claude_new] = claude(f"{NEW}.jsonl", NEW)
    assert {m.origin for m in replies(claude_new)} == {
        stamped("anthropic", "claude-sonnet-4-5-20250929", "claude-code")
    }
    assert {m.origin for m in replies(codex_session())} == {
        stamped("openai-responses", "gpt-5-codex", "codex")
    }
    assert {m.origin for m in replies(codex_older())} == {
        stamped("openai-responses", None, "codex")
    }
    # A Gemini CLI record without its model is still Gemini's, model unknown.
    unnamed = stamped("gemini", None, "gemini-cli")
    new_origins = {m.origin for m in replies(gemini_session(GEMINI_NEW))}
    assert stamped("gemini", "gemini-3-pro-preview", "gemini-cli") in new_origins
    assert new_origins <= {stamped("gemini", "gemini-3-pro-preview", "gemini-cli"), unnamed}
    assert {m.origin for m in replies(gemini_session(GEMINI_OLD))} <= {
        stamped("gemini", "gemini-2.5-flash", "gemini-cli"),
        stamped("gemini", "gemini-2.5-pro", "gemini-cli"),
        unnamed,
    }
    assert {m.origin for m in replies(sessions()[MAIN])} == {
        stamped("anthropic", "claude-sonnet-4-5", "opencode")
    }
    # Continue records no model, nor a provider but for Anthropic's signed thinking.
    for path in (CONTINUE_OLD, CONTINUE_NEW):
        for row in replies(continue_session(path)):
            expected = stamped("anthropic", None, "continue") if row.provider_data else None
            assert row.origin == expected
    # The user's rows and the tools' results have none.
    assert all(m.origin is None for m in claude_new.messages if m.role != "assistant")


def carried(session: Session) -> list[str]:
    return [s for m in session.messages for d in m.provider_data.values() for s in secrets(d)]


@pytest.mark.parametrize(
    ("source", "kind", "model"),
    [
        ("claude-code", "anthropic", "claude-sonnet-4-5"),
        ("codex", "openai-responses", "gpt-5-codex"),
        ("opencode", "anthropic", "claude-sonnet-4-5-20250929"),
    ],
)
def test_imported_state_goes_back_only_within_the_imports_scope(
    source: str, kind: str, model: str
) -> None:
    session = {
        "claude-code": lambda: claude(f"{NEW}.jsonl", NEW)[0],
        "codex": codex_older,
        "opencode": lambda: sessions()[MAIN],
    }[source]()
    state = carried(session)
    assert state, "the fixture carries state: the test could fail"
    rows = list(session.messages)

    def body_for(scope: str | None) -> str:
        to = Target.of(Route(kind, kind, model, None, None, scope))
        return json.dumps(format_body(kind, rows, model, target=to))

    inside, outside = body_for(f"import:{source}"), body_for(None)
    assert all(secret in inside for secret in state)
    assert not any(secret in outside for secret in state)
    assert not any(secret in body_for("import:other-tool") for secret in state)
