"""``prepare`` with a covering summary, calibration and compaction proposals reads only what it
needs (the rows after the coverage, the figures of covered and dropped turns, the oldest
uncovered turns when a proposal is due) and answers exactly what preparing every row answers:
the same body, estimates, trim report, compacted counts, calibration and proposal, on random
histories, coverages, calibrations and settings; also after storage retention deleted the oldest
turns, those a summary covers among them (it then precedes every stored turn and still goes in
the context note)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_context_properties import context_settings, histories
from test_context_window import (  # engine_stores: the autouse fixture of both modules
    KEY,
    append_in_pieces,
    budget_settings,
    engine_stores,  # noqa: F401
    example_folder,
    long_conversation,
    open_manager,
    options_strategy,
)

from chat_history.errors import ContextOverflow
from chat_history.model import Attachment, Message, Trimmed
from chat_history.policy.budget import Route, resolve_route
from chat_history.policy.calibration import calibration_of, key_of
from chat_history.policy.prepare.context import prepare_rows
from chat_history.providers import format_body
from chat_history.service import history, preparation, usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions
from chat_history.settings import ContextSettings, default_settings
from chat_history.store import queries, reading, tail
from chat_history.store import rows as row_codec

pytestmark = pytest.mark.engines


def request_rows(
    manager: ChatHistoryManager, route: Route, options: PrepareOptions
) -> preparation.RequestRows:
    """What ``prepare`` reads for ``KEY`` now (``preparation.request_rows`` in a snapshot)."""
    with manager.store.snapshot() as tx:
        return preparation.request_rows(tx, manager.settings, KEY, route, options)


def reference(manager: ChatHistoryManager, options: PrepareOptions) -> Any:
    """What preparing every stored row answers, with the stored summary and calibration."""
    rows, summary = history.whole(manager, KEY)
    route = resolve_route(manager.settings.active_provider, None, manager.settings)
    key = key_of(route)
    with manager.store.read() as tx:
        calibration = calibration_of(tx.calibration_ratios(key.kind, key.model))
    try:
        out = prepare_rows(
            rows,
            preparation.request_options(
                manager.settings, route, options, summary=summary, calibration=calibration
            ),
        )
    except ContextOverflow as overflow:
        return ("overflow", overflow.estimated_tokens, overflow.context_window)
    proposal = out.compaction
    return (
        format_body(route.kind, out.rows, route.model),
        out.estimated_tokens,
        out.raw_estimated_tokens,
        out.budget,
        out.trimmed,
        out.collapsed_tool_rows,
        out.collapsed_turns,
        out.compacted_turns,
        out.compacted_messages,
        out.calibration,
        None
        if proposal is None
        else (
            proposal.through_id,
            proposal.covered_turns,
            proposal.estimated_tokens,
            proposal.raw_estimated_tokens,
            format_body(route.kind, proposal.rows, route.model, swept=True),
        ),
        out.events,
    )


def windowed(manager: ChatHistoryManager, options: PrepareOptions, events: list[Trimmed]) -> Any:
    events.clear()
    try:
        out = history.prepare(manager, KEY, options)
    except ContextOverflow as overflow:
        return ("overflow", overflow.estimated_tokens, overflow.context_window)
    proposal = out.compaction
    return (
        out.body,
        out.estimated_tokens,
        out.raw_estimated_tokens,
        out.budget,
        out.trimmed,
        out.collapsed_tool_rows,
        out.collapsed_turns,
        out.compacted_turns,
        out.compacted_messages,
        out.calibration,
        None
        if proposal is None
        else (
            proposal.through_id,
            proposal.covered_turns,
            proposal.estimated_tokens,
            proposal.raw_estimated_tokens,
            proposal.request.body,
        ),
        tuple(events),
    )


IMAGE_QUESTION = Message(
    role="user",
    content="Q  [IMAGE:/tmp/shot.png]",
    attachments=(Attachment(kind="image", mime_type="image/png", data="iVBORw0KGgo="),),
)


def example_context(**changes: Any) -> ContextSettings:
    """The context settings of an explicit example: no budget, no turn limit, no pruning,
    compaction at its ratio 1 with one recent turn, then ``changes``."""
    base = attrs.evolve(
        default_settings().context,
        max_context_tokens=None,
        compact_ratio=None,
        history_pruning_enabled=False,
        history_pruning_max_tokens=0,
        keep_tool_context_turns=None,
        preset="default",
        prompt_cache="auto",
        compaction_prompt=None,
        max_history_turns=0,
        compaction_trigger_ratio=1.0,
        compaction_keep_recent_turns=1,
        compaction_max_summary_tokens=100,
    )
    return attrs.evolve(base, **changes)


@st.composite
def compaction_settings(draw: st.DrawFn) -> ContextSettings:
    """Context settings whose budgets are large enough for proposals to happen."""
    ctx = draw(context_settings())
    return attrs.evolve(
        ctx,
        max_context_tokens=draw(st.one_of(st.none(), st.integers(300, 3_000))),
        compaction_enabled=draw(st.booleans() | st.just(True)),
        compaction_trigger_ratio=draw(st.floats(0.2, 1.0)),
        compaction_keep_recent_turns=draw(st.integers(1, 4)),
        compaction_max_summary_tokens=draw(st.integers(100, 400)),
    )


@settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(
    st.lists(histories(), min_size=1, max_size=6),
    compaction_settings(),
    options_strategy,
    st.lists(st.integers(1, 6), max_size=30),
    st.one_of(st.none(), st.text(alphabet="ab ", max_size=40)),
    st.one_of(st.none(), st.floats(0.0, 0.7), st.floats(0.0, 1.2)),
    st.lists(st.integers(1, 400), max_size=3),
    st.one_of(st.none(), st.tuples(st.integers(0, 40), st.booleans())),
)
# Found by a random run: the budget's line (trimLowWater 0.875, judged before the turn limit)
# fell inside the omitted turns, which were dropped whole: the budget dropped 3 turns where
# preparing every row drops 2 (and the turn limit 3 where it drops 2).
@example(
    pieces=[[IMAGE_QUESTION] * 6],
    ctx=example_context(trim_low_water=0.875, compaction_enabled=False),
    options=PrepareOptions(),
    batches=[],
    summary=None,
    coverage=None,
    prompt_tokens=[167],
    retention=None,
)
# The same, found by another run: the budget reported where preparing every row reports the
# turn limit (a compaction proposal due, trimLowWater 0.5).
@example(
    pieces=[
        [IMAGE_QUESTION, Message(role="user", content="Q "), Message(role="user", content="Q ")]
    ],
    ctx=example_context(max_context_tokens=300, trim_low_water=0.5, compaction_enabled=True),
    options=PrepareOptions(keep_tool_context_turns=0),
    batches=[],
    summary=None,
    coverage=None,
    prompt_tokens=[],
    retention=None,
)
def test_a_compacted_windowed_prepare_answers_what_preparing_every_row_answers(
    pieces: list[list[Message]],
    ctx: ContextSettings,
    options: PrepareOptions,
    batches: list[int],
    summary: str | None,
    coverage: float | None,
    prompt_tokens: list[int],
    retention: tuple[int, bool] | None,
) -> None:
    rows = [row for piece in pieces for row in piece]
    if not rows:
        return
    events: list[Trimmed] = []
    with example_folder() as folder:
        manager = open_manager(folder, budget_settings(), events)
        manager = manager.under(attrs.evolve(manager.settings, context=ctx))
        try:
            try:
                append_in_pieces(manager, rows, batches)
            except Exception:
                return
            stored = history.get(manager, KEY).messages
            if summary is not None:
                through = None
                if coverage is not None and stored:
                    through = stored[min(len(stored) - 1, int(coverage * len(stored)))].id
                history.save_summary(manager, KEY, summary, through)
            for prompt in prompt_tokens:
                usage.report(manager, None, None, 100, prompt)
            if retention is not None:  # delete the oldest turns (maxMessages), now
                max_messages, preserve = retention
                manager = manager.under(
                    attrs.evolve(
                        manager.settings,
                        enable_auto_pruning=True,
                        max_messages=max_messages,
                        preserve_system_messages=preserve,
                    )
                )
                history.whole(manager, KEY)
            answer = windowed(manager, options, events)
            assert answer == reference(manager, options)
            if answer[0] != "overflow":
                event(f"proposal: {answer[10] is not None}, compacted: {answer[7] > 0}")
                event(f"summary precedes every stored turn: {precedes_stored(manager)}")
        finally:
            manager.store.close()


def precedes_stored(manager: ChatHistoryManager) -> bool:
    """Whether the summary's coverage lies before every stored non-system row (what it covered
    was deleted)."""
    rows, summary = history.whole(manager, KEY)
    spoken = [row.id for row in rows if row.role != "system"]
    through = summary.covers_through_id if summary is not None else None
    return through is not None and bool(spoken) and through < spoken[0]


def test_a_long_compacted_conversation_reads_only_after_its_coverage(tmp_path: Path) -> None:
    """600 turns, a summary covering all but the newest 6: the request reads a few rows, and
    answers what preparing all 1,800 rows answers."""
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=4_000), events)
    stored = history.append(manager, KEY, long_conversation(600)).messages
    users = [row for row in stored if row.role == "user"]
    history.save_summary(manager, KEY, "The first 594 turns.", users[-6].id - 1)
    route = resolve_route("openai", None, manager.settings)

    rows, omitted, _ = request_rows(manager, route, PrepareOptions())

    assert omitted is not None and omitted.covered.turns == 594
    assert omitted.beyond_limit.turns == omitted.within_limit.turns == 0
    assert len(rows) < 40  # the system rows and the newest 6 turns
    assert windowed(manager, PrepareOptions(), events) == reference(manager, PrepareOptions())
    prepared = history.prepare(manager, KEY, PrepareOptions())
    assert prepared.compacted_turns == 594 and prepared.compaction is None


def rows_decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every row the store decodes from SQL from now on."""
    count = [0]

    def counting(raw: Any) -> Any:
        count[0] += 1
        return row_codec.to_message(raw)

    for module in (queries, tail, reading):
        monkeypatch.setattr(module, "to_message", counting)
    return count


def test_a_due_proposal_reads_the_oldest_uncovered_turns_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a summary, a long conversation proposes compacting its oldest turns: the proposal
    is the one preparing every row gives, read from a bounded head of the conversation."""
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=4_000), events)
    history.append(manager, KEY, long_conversation(600))
    manager.store.close()  # nothing remembered: every row the prepare needs is read
    decoded = rows_decoded(monkeypatch)
    prepared = history.prepare(manager, KEY, PrepareOptions())
    assert prepared.compaction is not None
    assert 0 < decoded[0] < 120, "a bounded head and window of the 1,800 rows"
    assert windowed(manager, PrepareOptions(), events) == reference(manager, PrepareOptions())
    # save it: the next proposal starts after it, and no span is proposed twice
    history.save_summary(manager, KEY, "summary one", prepared.compaction.through_id)
    again = history.prepare(manager, KEY, PrepareOptions())
    assert again.compacted_turns == prepared.compaction.covered_turns
    assert again.compaction is not None
    assert again.compaction.through_id > prepared.compaction.through_id
    assert again.compaction.covered_turns > prepared.compaction.covered_turns
    assert windowed(manager, PrepareOptions(), events) == reference(manager, PrepareOptions())


def test_a_coverage_that_cuts_a_turn_leaves_that_turn_uncovered(tmp_path: Path) -> None:
    """A ``coversThroughId`` inside a turn (a client's own choice): that turn is sent and may
    be proposed, with the same answer as preparing every row."""
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=4_000), events)
    stored = history.append(manager, KEY, long_conversation(300)).messages
    prompt = [row for row in stored if row.role == "user"][40]
    history.save_summary(manager, KEY, "forty turns", prompt.id)  # the prompt of turn 41 only
    usage.report(manager, None, None, 100, 130)
    prepared = history.prepare(manager, KEY, PrepareOptions())
    assert prepared.compacted_turns == 40
    assert prepared.compaction is not None and prepared.compaction.covered_turns > 41
    assert prepared.calibration.factor == 1.3
    assert windowed(manager, PrepareOptions(), events) == reference(manager, PrepareOptions())


def test_a_summary_whose_turns_retention_deleted_is_sent_from_a_window(tmp_path: Path) -> None:
    """600 turns, a summary covering the first 10, then retention deletes the oldest 200 or so:
    the summary precedes every stored turn. The request reads only its newest turns, still sends
    the summary (after the breadcrumb), proposes a compaction that carries it, and answers what
    preparing every row answers."""
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=4_000), events)
    stored = history.append(manager, KEY, long_conversation(600)).messages
    users = [row for row in stored if row.role == "user"]
    history.save_summary(manager, KEY, "The first ten turns.", users[10].id - 1)
    manager = manager.under(attrs.evolve(manager.settings, max_messages=1_000))
    kept, summary = history.whole(manager, KEY)  # retention deletes the oldest turns now
    spoken = [row for row in kept if row.role != "system"]
    assert summary is not None and summary.covers_through_id is not None
    assert summary.covers_through_id < spoken[0].id
    route = resolve_route("openai", None, manager.settings)

    rows, omitted, _ = request_rows(manager, route, PrepareOptions())

    assert omitted is not None and omitted.covered.turns == 0
    assert omitted.within_limit.turns + omitted.beyond_limit.turns > 0
    assert omitted.oldest_spoken_id == spoken[0].id
    assert len(rows) < 100
    assert windowed(manager, PrepareOptions(), events) == reference(manager, PrepareOptions())
    prepared = history.prepare(manager, KEY, PrepareOptions())
    assert "The first ten turns." in str(prepared.body)
    assert prepared.compacted_turns == 0 and prepared.trimmed is not None
    assert prepared.compaction is not None
    assert "The first ten turns." in str(prepared.compaction.request.body)
