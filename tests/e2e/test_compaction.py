"""Compaction and calibrated estimates over the real process (protocol.md "Version 2":
Compaction and calibrated estimates; semantics.md "Version 2").

A long conversation is driven by a scripted "model" (a test double here, not a mock of the
server): it answers every prepared request with a reply, and every compaction proposal with a
summary that the test saves with ``coversThroughId``. ``reportUsage`` is checked over the wire:
bad input, clipping, the median of the newest 20, persistence across a restart, sharing between
two processes, and its effect on ``prepare``'s estimates and budget decisions."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException
from tests.e2e.conftest import Session, StartSession

pytestmark = pytest.mark.engines

#: Retention that keeps everything, so only request-time rules act.
KEEP_ALL = {"maxMessages": 100_000, "maxTokens": 0, "maxAgeHours": 0}
BUDGET = 1_000
COMPACTION = {"triggerRatio": 0.8, "keepRecentTurns": 2, "maxSummaryTokens": 300}
SETTINGS = {**KEEP_ALL, "context": {"maxContextTokens": BUDGET, "compaction": COMPACTION}}
BREADCRUMB = "[earlier turns omitted to fit the context window]"
SUMMARY_HEADER = "[Summary of earlier turns]\n"


def tokens(text: str) -> int:
    """A row's estimate (semantics.md, Token estimate)."""
    return math.ceil(len(text.encode()) / 4) + 4


def prompt_text(n: int) -> str:
    return f"U{n}: " + "u" * 200


def reply_text(n: int) -> str:
    return f"A{n}: " + "a" * 200


def contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"]]


def turns_in(texts: list[str]) -> list[int]:
    """The turn numbers whose prompts a request sends (its ``U<n>:`` rows)."""
    return [int(m.group(1)) for t in texts if (m := re.match(r"U(\d+): ", t))]


def is_compaction_request(body: dict[str, Any]) -> bool:
    return body["messages"][-1]["content"].startswith("Summarize the conversation above")


def scripted_model(body: dict[str, Any]) -> str:
    """The test's stand-in for a model behind an OpenAI-compatible API: a compaction request is
    answered with a summary naming the turns it saw (and those of the summary it builds on); any
    other request with the reply to its newest prompt."""
    texts = [m["content"] for m in body["messages"]]
    if is_compaction_request(body):
        seen = set(turns_in(texts))
        for text in texts:
            if text.startswith(SUMMARY_HEADER):
                seen.update(int(n) for n in re.findall(r"turn (\d+)", text))
        return "Summary: " + ", ".join(f"turn {n}" for n in sorted(seen))
    return reply_text(turns_in(texts)[-1])


async def prepare(session: Session, conversation: str = "c", **params: Any) -> Any:
    return await session.request("chatHistory/prepare", {"conversationId": conversation, **params})


async def report(session: Session, **params: Any) -> Any:
    return await session.request("chatHistory/reportUsage", params)


async def expect_invalid(session: Session, method: str, params: dict[str, Any], field: str) -> str:
    with pytest.raises(JsonRpcException) as caught:
        await session.request(method, params)
    assert caught.value.code == -32602, caught.value
    assert caught.value.data == {"field": field}, caught.value.data
    return str(caught.value.message)


async def stop(session: Session) -> None:
    """Shut a session's server down now (the fixture then only stops the client)."""
    await session.client.shutdown_session()
    session.client.capabilities = None


# -- compaction ----------------------------------------------------------------------------------


async def test_a_long_conversation_compacts_through_the_proposals(start_session: StartSession):
    session = await start_session(settings=SETTINGS)
    await session.append("c", {"role": "system", "content": "Be brief."})
    proposals: list[dict[str, Any]] = []
    covered_through = 0  # the newest turn the saved summary covers
    previous: dict[str, Any] | None = None
    for n in range(1, 31):
        await session.append("c", {"role": "user", "content": prompt_text(n)})
        prepared = await prepare(session, provider="openai", model="m")
        texts = contents(prepared)
        sent = turns_in(texts)
        assert sent == list(range(sent[0], n + 1)), "whole turns, in order, the newest last"
        assert prepared["calibration"] == {"factor": 1.0, "samples": 0}
        assert prepared["rawEstimatedTokens"] == prepared["estimatedTokens"]
        # The saved summary stands in for the turns it covers: none of their text is sent.
        assert prepared["compactedTurns"] == covered_through
        assert prepared["compactedMessages"] == 2 * covered_through
        assert all(t > covered_through for t in sent)
        if covered_through:
            notes = [t for t in texts if t.startswith(SUMMARY_HEADER)]
            assert notes == [SUMMARY_HEADER + (await summary_of(session))["summary"]]
            assert texts[0] == "Be brief." and texts[1] == notes[0]
        # The proposal appears exactly when the estimate before trimming passes the trigger
        # and more than keepRecentTurns turns lie after the coverage.
        before = prepared["trimmed"]["tokensBefore"] if prepared["trimmed"] else None
        estimate = before if before is not None else prepared["estimatedTokens"]
        due = estimate > BUDGET * 0.8 and n - covered_through > COMPACTION["keepRecentTurns"]
        proposal = prepared["compaction"]
        assert (proposal is not None) == due, (n, estimate, proposal)
        if previous is not None and previous["compaction"] is not None:
            # the proposal before this request was saved: this one is smaller
            assert prepared["estimatedTokens"] < previous["estimatedTokens"]
            assert prepared["compactedTurns"] > previous["compactedTurns"]
        previous = prepared
        if proposal is not None:
            covered_through = await accept(session, proposal, covered_through, n)
            proposals.append(proposal)
        answer = scripted_model(prepared["body"])
        await session.append("c", {"role": "assistant", "content": answer})

    assert len(proposals) >= 3, "a 30-turn conversation compacts again and again"
    through_ids = [p["throughId"] for p in proposals]
    assert through_ids == sorted(set(through_ids)), "never proposed twice for the same span"
    # The stored rows stay: get returns the whole conversation.
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert [m["content"] for m in got["messages"]] == ["Be brief."] + [
        text for n in range(1, 31) for text in (prompt_text(n), reply_text(n))
    ]
    assert got["summary"]["coversThroughId"] == through_ids[-1]
    assert session.trimmed == [], "the summary kept every request within its budget"


async def summary_of(session: Session) -> dict[str, Any]:
    summary = await session.request("chatHistory/getSummary", {"conversationId": "c"})
    assert summary is not None
    return summary


async def accept(session: Session, proposal: dict[str, Any], covered_through: int, n: int) -> int:
    """Check a proposal, have the scripted model answer it and save the summary; returns the
    newest turn the summary now covers."""
    request = proposal["request"]
    assert request["provider"] == "openai" and request["model"] == "m"
    texts = contents(request)
    span = turns_in(texts)
    assert span, "the proposal covers at least one turn"
    assert span == list(range(covered_through + 1, span[-1] + 1)), "the turns after the coverage"
    assert span[-1] <= n - COMPACTION["keepRecentTurns"], "the newest turns are never summarized"
    assert proposal["coveredTurns"] == span[-1], "coveredTurns is cumulative"
    assert texts[0] == "Be brief."
    if covered_through:  # cumulative: the request builds on the current summary
        assert texts[1] == SUMMARY_HEADER + (await summary_of(session))["summary"]
    assert is_compaction_request(request["body"])
    raw = sum(tokens(t) for t in texts)
    assert proposal["rawEstimatedTokens"] == raw == proposal["estimatedTokens"]
    assert raw <= BUDGET - COMPACTION["maxSummaryTokens"]
    # throughId is the last row of the newest turn the request holds (its reply).
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    reply_id = next(m["id"] for m in got["messages"] if m["content"] == reply_text(span[-1]))
    assert proposal["throughId"] == reply_id
    summary = scripted_model(request["body"])
    assert summary.endswith(f"turn {span[-1]}") and (covered_through == 0 or "turn 1," in summary)
    saved = await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": summary, "coversThroughId": proposal["throughId"]},
    )
    assert saved["coversThroughId"] == proposal["throughId"]
    return span[-1]


async def test_without_a_saved_summary_prepare_trims_as_before(start_session: StartSession):
    """An ignored proposal, or a summary that failed to save, leaves the trimming in place and
    the proposal standing."""
    session = await start_session(settings=SETTINGS)
    for n in range(1, 13):
        await session.append(
            "c",
            {"role": "user", "content": prompt_text(n)},
            {"role": "assistant", "content": reply_text(n)},
        )
    first = await prepare(session)
    assert first["compaction"] is not None and first["compactedTurns"] == 0
    assert first["trimmed"]["reason"] == "tokenBudget"
    assert contents(first)[0] == BREADCRUMB
    # a save that fails (another conversation's row) stores nothing
    other = await session.append("other", {"role": "user", "content": "elsewhere"})
    await expect_invalid(
        session,
        "chatHistory/saveSummary",
        {
            "conversationId": "c",
            "summary": "never saved",
            "coversThroughId": other["messages"][0]["id"],
        },
        "coversThroughId",
    )
    assert await session.request("chatHistory/getSummary", {"conversationId": "c"}) is None
    again = await prepare(session)
    assert again["body"] == first["body"] and again["trimmed"] == first["trimmed"]
    assert again["compaction"] == first["compaction"], "the same proposal until one is saved"
    assert again["compactedTurns"] == 0


async def test_a_summary_is_still_sent_once_retention_deleted_the_turns_it_covers(
    start_session: StartSession,
):
    """A client's report: with maxMessages 6, the summary of turn 1 stands in for it; once the
    count rule deleted turn 1, the summary must still be sent (the model would otherwise lose
    both the turn and its summary), though no stored turn is compacted any more."""
    session = await start_session(settings={"maxMessages": 6, "maxTokens": 0, "maxAgeHours": 0})
    stored = []
    for n in range(1, 4):
        added = await session.append(
            "c",
            {"role": "user", "content": prompt_text(n)},
            {"role": "assistant", "content": reply_text(n)},
        )
        stored += added["messages"]
    summary = "Summary: turn 1"
    await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": summary, "coversThroughId": stored[1]["id"]},
    )
    covering = await prepare(session, provider="openai", model="m")
    assert contents(covering)[0] == SUMMARY_HEADER + summary
    assert turns_in(contents(covering)) == [2, 3]
    assert (covering["compactedTurns"], covering["compactedMessages"]) == (1, 2)

    await session.append("c", {"role": "user", "content": prompt_text(4)})
    kept = [prompt_text(2), reply_text(2), prompt_text(3), reply_text(3), prompt_text(4)]
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert [m["content"] for m in got["messages"]] == kept, "the count rule deleted turn 1"
    assert (await summary_of(session))["summary"] == summary
    prepared = await prepare(session, provider="openai", model="m")
    texts = contents(prepared)
    assert texts == [SUMMARY_HEADER + summary, *kept]
    assert (prepared["compactedTurns"], prepared["compactedMessages"]) == (0, 0)
    assert prepared["trimmed"] is None
    assert prepared["estimatedTokens"] == sum(tokens(t) for t in texts)


async def test_a_proposal_with_calibration_and_an_alias(start_session: StartSession):
    """The proposal is for the prepare's own route (an alias keeps its name and model), and its
    estimate is calibrated by that route's factor while its raw figure is not."""
    aliases = {"local": {"provider": "ollama", "model": "qwen", "contextWindow": 100_000}}
    session = await start_session(settings={**SETTINGS, "providers": aliases})
    for n in range(1, 9):
        await session.append(
            "c",
            {"role": "user", "content": prompt_text(n)},
            {"role": "assistant", "content": reply_text(n)},
        )
    assert await report(session, provider="local", estimatedTokens=100, promptTokens=110) == {
        "factor": 1.1,
        "samples": 1,
    }
    prepared = await prepare(session, provider="local")
    assert prepared["calibration"] == {"factor": 1.1, "samples": 1}
    proposal = prepared["compaction"]
    assert proposal is not None
    assert proposal["request"]["provider"] == "local" and proposal["request"]["model"] == "qwen"
    raw = sum(tokens(t) for t in contents(proposal["request"]))
    assert proposal["rawEstimatedTokens"] == raw
    assert proposal["estimatedTokens"] == -(-raw * 11 // 10)


# -- saveSummary coversThroughId -----------------------------------------------------------------


async def test_save_summary_checks_covers_through_id(start_session: StartSession):
    session = await start_session()
    mine = await session.append(
        "c", {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}
    )
    theirs = await session.append("d", {"role": "user", "content": "other"})
    first = await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": "kept", "coversThroughId": mine["messages"][0]["id"]},
    )
    bad_ids = [theirs["messages"][0]["id"], mine["messages"][1]["id"] + 1_000, 0, -1]
    for bad in bad_ids:
        message = await expect_invalid(
            session,
            "chatHistory/saveSummary",
            {"conversationId": "c", "summary": "replaced?", "coversThroughId": bad},
            "coversThroughId",
        )
        assert "coversThroughId" in message and str(bad) not in message.split(":", 1)[1]
    # the failed requests changed nothing
    assert await summary_of(session) == first
    # the same id in another workspace is not a row of that conversation either
    await expect_invalid(
        session,
        "chatHistory/saveSummary",
        {
            "conversationId": "c",
            "workspace": "elsewhere",
            "summary": "x",
            "coversThroughId": mine["messages"][0]["id"],
        },
        "coversThroughId",
    )
    # a summary without coverage, and one covering the newest row, are fine
    plain = await session.request(
        "chatHistory/saveSummary", {"conversationId": "c", "summary": "p"}
    )
    assert plain["coversThroughId"] is None
    newest = await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": "n", "coversThroughId": mine["messages"][1]["id"]},
    )
    assert newest["coversThroughId"] == mine["messages"][1]["id"]


# -- reportUsage ---------------------------------------------------------------------------------


BAD_USAGE = [
    ({"promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": 10}, "promptTokens"),
    ({"estimatedTokens": 0, "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": -3, "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": 1.5, "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": "10", "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": True, "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": None, "promptTokens": 10}, "estimatedTokens"),
    ({"estimatedTokens": 10, "promptTokens": 0}, "promptTokens"),
    ({"estimatedTokens": 10, "promptTokens": -1}, "promptTokens"),
    ({"estimatedTokens": 10, "promptTokens": 2.0}, "promptTokens"),
    ({"estimatedTokens": 10, "promptTokens": 10, "provider": "nope"}, "provider"),
    ({"estimatedTokens": 10, "promptTokens": 10, "provider": 5}, "provider"),
    ({"estimatedTokens": 10, "promptTokens": 10, "model": 5}, "model"),
]


async def test_report_usage_refuses_bad_figures(start_session: StartSession):
    session = await start_session()
    for params, field in BAD_USAGE:
        await expect_invalid(session, "chatHistory/reportUsage", params, field)
    # the failed requests recorded nothing, under any key they named
    await session.append("c", {"role": "user", "content": "hi"})
    assert (await prepare(session))["calibration"] == {"factor": 1.0, "samples": 0}
    # a good report after them is the first sample
    assert await report(session, estimatedTokens=10, promptTokens=12) == {
        "factor": 1.2,
        "samples": 1,
    }


async def test_report_usage_clips_and_takes_the_median_of_the_newest_20(
    start_session: StartSession,
):
    session = await start_session()
    # absurd ratios are clipped to [0.25, 4]
    assert await report(session, model="wild", estimatedTokens=1, promptTokens=10**12) == {
        "factor": 4.0,
        "samples": 1,
    }
    assert await report(session, model="wild", estimatedTokens=10**12, promptTokens=1) == {
        "factor": (4.0 + 0.25) / 2,
        "samples": 2,
    }
    # the median of the newest 20 ratios (the mean of the middle two for an even count)
    prompts = [137, 80, 95, 250, 101, 120, 99, 60, 180, 110, 90, 130, 75, 140, 105, 88, 160, 70,
               115, 100, 300, 50, 125, 98, 111]  # fmt: skip
    ratios: list[float] = []
    for prompt in prompts:
        ratios.append(prompt / 100)
        answer = await report(session, model="m", estimatedTokens=100, promptTokens=prompt)
        newest = sorted(ratios[-20:])
        middle = len(newest) // 2
        median = newest[middle] if len(newest) % 2 else (newest[middle - 1] + newest[middle]) / 2
        assert answer == {"factor": median, "samples": len(newest)}
    # keys are (provider kind, model): the other keys were not touched
    await session.append("c", {"role": "user", "content": "hi"})
    wild = await prepare(session, model="wild")
    assert wild["calibration"] == {"factor": 2.125, "samples": 2}
    assert (await prepare(session, model="other"))["calibration"] == {"factor": 1.0, "samples": 0}
    other_kind = await prepare(session, provider="anthropic", model="m")
    assert other_kind["calibration"] == {"factor": 1.0, "samples": 0}


async def test_calibration_persists_across_a_restart(start_session: StartSession, tmp_path):
    storage = tmp_path / "shared"
    first = await start_session(storage=storage)
    await report(first, estimatedTokens=100, promptTokens=150)
    await report(first, estimatedTokens=100, promptTokens=170)
    await stop(first)
    second = await start_session(storage=storage)
    await second.append("c", {"role": "user", "content": "hi"})
    assert (await prepare(second))["calibration"] == {"factor": 1.6, "samples": 2}
    assert await report(second, estimatedTokens=100, promptTokens=120) == {
        "factor": 1.5,
        "samples": 3,
    }


async def test_calibration_is_shared_by_two_processes(start_session: StartSession, tmp_path):
    storage = tmp_path / "shared"
    one = await start_session(storage=storage)
    two = await start_session(storage=storage)
    await one.append("c", {"role": "user", "content": "x" * 400})  # 100 + 4 tokens
    # both processes have read the (empty) calibration before
    assert (await prepare(one))["estimatedTokens"] == 104
    assert (await prepare(two))["estimatedTokens"] == 104
    assert await report(one, estimatedTokens=100, promptTokens=200) == {"factor": 2.0, "samples": 1}
    seen = await prepare(two)
    assert seen["calibration"] == {"factor": 2.0, "samples": 1}
    assert seen["estimatedTokens"] == 208 and seen["rawEstimatedTokens"] == 104
    assert await report(two, estimatedTokens=100, promptTokens=100) == {"factor": 1.5, "samples": 2}
    assert (await prepare(one))["calibration"] == {"factor": 1.5, "samples": 2}


async def test_the_factor_moves_estimates_and_budget_decisions(start_session: StartSession):
    session = await start_session(settings={**KEEP_ALL, "context": {"maxContextTokens": 500}})
    turn = ("U: " + "x" * 400, "A")  # 105 + 5 tokens
    await session.append("c", {"role": "system", "content": "sys"})  # 5 tokens
    for _ in range(3):
        await session.append(
            "c", {"role": "user", "content": turn[0]}, {"role": "assistant", "content": turn[1]}
        )
    plain = await prepare(session)
    assert plain["estimatedTokens"] == plain["rawEstimatedTokens"] == 335
    assert plain["trimmed"] is None and len(contents(plain)) == 7
    await report(session, estimatedTokens=335, promptTokens=670)
    calibrated = await prepare(session)
    # 335 x 2 = 670 > 500: the oldest turn goes; 5 + 17 (breadcrumb) + 220 = 242 raw, 484 calibrated
    assert calibrated["calibration"] == {"factor": 2.0, "samples": 1}
    assert calibrated["rawEstimatedTokens"] == 5 + tokens(BREADCRUMB) + 220 == 242
    assert calibrated["estimatedTokens"] == 484
    assert calibrated["trimmed"] == {
        "droppedMessages": 2,
        "droppedTurns": 1,
        "retainedTurns": 2,
        "reason": "tokenBudget",
        "tokensBefore": 670,
        "tokensAfter": 484,
    }
    assert session.trimmed[-1] == {
        "workspace": session.trimmed[-1]["workspace"],
        "conversationId": "c",
        "scope": "request",
        "reason": "tokenBudget",
        "droppedMessages": 2,
        "droppedTurns": 1,
        "retainedTurns": 2,
        "tokensBefore": 670,
        "tokensAfter": 484,
        "budget": 500,
    }
    # format and the stored rows' tokens stay uncalibrated
    formatted = await session.request("chatHistory/format", {"conversationId": "c"})
    assert len(formatted["body"]["messages"]) == 7
    got = await session.request("chatHistory/get", {"conversationId": "c"})
    assert sum(m["tokens"] for m in got["messages"]) == 335


async def test_the_window_check_uses_the_calibrated_estimate(start_session: StartSession):
    aliases = {"small": {"provider": "openai", "model": "s", "contextWindow": 150}}
    session = await start_session(
        settings={**KEEP_ALL, "providers": aliases, "context": {"maxContextTokens": 0}}
    )
    await session.append("c", {"role": "user", "content": "x" * 400})  # 104 tokens
    assert (await prepare(session, provider="small"))["estimatedTokens"] == 104
    await report(session, provider="small", estimatedTokens=100, promptTokens=150)
    with pytest.raises(JsonRpcException) as caught:
        await prepare(session, provider="small")
    assert caught.value.code == 1001
    assert caught.value.data == {"estimatedTokens": 156, "contextWindow": 150}
