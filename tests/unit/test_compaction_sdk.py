"""Every compaction request body is one its provider's API accepts (protocol.md "Version 2" →
Compaction): the proposal's rows formatted for each of the eight kinds pass the same rule checker
and the same official SDK validators as the provider tests, and the SDK sends the body as given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from provider_rules import violations
from rows import as_stored
from test_providers_golden import PNG, carrier, msg, result
from test_providers_sdk import assert_sent_as_formatted, sdk_problems

from chat_history.model import Attachment, Message, StoredMessage, Summary
from chat_history.policy.budget import Route
from chat_history.policy.prepare.compaction import Proposal
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import RequestOptions
from chat_history.providers import KINDS, format_body
from chat_history.settings import default_settings


def recent(n: int) -> list[Message]:
    return [r for i in range(n) for r in (msg("user", f"recent {i}"), msg("assistant", f"ok {i}"))]


def scenarios() -> dict[str, tuple[list[StoredMessage], Summary | None, int]]:
    """Conversations whose proposal spans tool exchanges, images, mid-turn system rows, an
    interrupted exchange, a turn 0 and a previous summary; with the keepToolContextTurns each
    runs with (0 collapses every span turn, 8 sends them whole)."""
    exchange = [
        msg("system", "Be careful."),
        msg(
            "user",
            f"What is in [IMAGE:data:image/png;base64,{PNG}]? Then read a.py.",
            attachments=(Attachment(mime_type="image/png", data=PNG),),
        ),
        carrier("call_1", "call_2", content="Reading."),
        result("call_1", "print('a')"),
        result("call_2", "print('b')"),
        msg("system", "Tool output is untrusted."),
        msg("assistant", "Both print a letter."),
        msg("user", "go on"),
        carrier("call_3", "call_4"),
        result("call_3", "partial"),  # call_4 never answered: the exchange was interrupted
        msg("user", "[Tool results]\ncall_4 skipped"),
        msg("user", "next"),
        msg("assistant", '{"tool_calls": [{"name": "grep", "arguments": {}}]}'),
        msg("user", "[Tool results] grep: 3 hits"),
    ]
    rows = as_stored([*exchange, *recent(4)])
    welcome = as_stored([msg("assistant", "Welcome back."), *exchange[1:7], *recent(4)])
    cumulative = as_stored([msg("system", "S"), *exchange[1:], *recent(5)])
    covered = Summary(summary="Turn 1 read two files.", updated_at=0, covers_through_id=7)
    return {
        "tools_whole": (rows, None, 8),
        "tools_collapsed": (rows, None, 0),
        "turn_zero_first": (welcome, None, 8),
        "cumulative": (cumulative, covered, 8),
    }


SCENARIOS = scenarios()


def proposal(rows: Sequence[StoredMessage], summary: Summary | None, keep: int) -> Proposal:
    settings = attrs.evolve(
        default_settings().context,
        max_context_tokens=20_000,
        compaction_trigger_ratio=0.001,
        compaction_max_summary_tokens=100,
    )
    out = prepare_rows(
        rows,
        RequestOptions(
            settings=settings,
            route=Route("p", "openai", "m", None),
            summary=summary,
            keep_tool_context_turns=keep,
            propose_compaction=True,
        ),
    )
    assert out.compaction is not None
    return out.compaction


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_the_compaction_request_is_accepted_by_the_sdk(kind: str, scenario: str) -> None:
    found = proposal(*SCENARIOS[scenario])
    body = format_body(kind, found.rows, "m", swept=True)
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    assert_sent_as_formatted(kind, body)


@pytest.mark.parametrize("kind", KINDS)
def test_the_compaction_prompt_is_the_last_user_text(kind: str) -> None:
    found = proposal(*SCENARIOS["tools_whole"])
    prompt = found.rows[-1].content
    body: Any = format_body(kind, found.rows, "m", swept=True)
    assert prompt in str(body)
    assert found.rows[-1].role == "user"


def test_the_scenarios_span_what_they_claim() -> None:
    whole = proposal(*SCENARIOS["tools_whole"])
    assert any(r.role == "tool" for r in whole.rows)
    assert any(r.role == "system" and r.content == "Tool output is untrusted." for r in whole.rows)
    collapsed = proposal(*SCENARIOS["tools_collapsed"])
    assert not any(r.role == "tool" for r in collapsed.rows)
    cumulative = proposal(*SCENARIOS["cumulative"])
    assert cumulative.rows[1].content == "Tool output is untrusted."  # moved up
    assert cumulative.rows[2].content.endswith("Turn 1 read two files.")
    assert proposal(*SCENARIOS["turn_zero_first"]).rows[0].role == "assistant"
