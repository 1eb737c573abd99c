"""The compaction proposal is worked out once per change of the conversation (issue 23): a
``prepare`` that finds the database, the route, the options and the settings as they were reuses
the last proposal; every path that changes the conversation (here or in another process), the
settings or the calibration makes the next ``prepare`` answer what a fresh server answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from rows import A, T, U

from chat_history.service import edits, history, usage
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PreparedRequest, PrepareOptions
from chat_history.store import Key

KEY = Key("ws", "memo")
pytestmark = pytest.mark.engines

SETTINGS: dict[str, Any] = {
    "maxMessages": 1_000_000,
    "maxTokens": 0,
    "context": {
        "maxContextTokens": 3_000,
        "compaction": {"triggerRatio": 0.3, "keepRecentTurns": 2, "maxSummaryTokens": 300},
    },
}


def exchanges() -> list[Any]:
    rows: list[Any] = []
    for n in range(12):
        rows += [U(f"question {n} " + "q" * 300), A(f"c{n}", f"c{n}")]
        rows += [T(f"c{n}", f"output {n} " + "o" * 200), A(f"answer {n} " + "a" * 300)]
    return rows


def prepare(manager: ChatHistoryManager) -> PreparedRequest:
    return history.prepare(manager, KEY, PrepareOptions(provider="openai"))


@pytest.fixture
def manager(make_manager: Callable[..., ChatHistoryManager]) -> ChatHistoryManager:
    made = make_manager(SETTINGS)
    history.append(made, KEY, exchanges())
    return made


def test_a_prepare_with_nothing_changed_reuses_the_proposal(manager: ChatHistoryManager) -> None:
    first = prepare(manager)
    assert first.compaction is not None
    second = prepare(manager)
    assert second.compaction is first.compaction  # not built again
    assert second.body == first.body


def fresh(make_manager: Callable[..., ChatHistoryManager], settings: Any = SETTINGS) -> Any:
    """What a server that remembers nothing answers now: the reference."""
    return prepare(make_manager(settings)).compaction


def first_row_id(manager: ChatHistoryManager) -> int:
    return history.get(manager, KEY).messages[0].id


CHANGES: dict[str, Callable[[ChatHistoryManager], object]] = {
    "append": lambda m: history.append(m, KEY, [U("one more " + "x" * 400)]),
    # the same length: the totals do not change, the text does
    "edit": lambda m: edits.edit_message(
        m, KEY, first_row_id(m), MessageEdit(content="QUESTION 0 " + "Q" * 300)
    ),
    "deleteTurns": lambda m: edits.delete_turns(m, KEY, [1]),
    "truncate": lambda m: edits.truncate(m, KEY, history.get(m, KEY).messages[-4].id),
    "saveSummary": lambda m: history.save_summary(
        m, KEY, "so far", history.get(m, KEY).messages[7].id
    ),
    "clear": lambda m: history.clear(m, KEY),
    "reportUsage": lambda m: usage.report(m, "openai", None, 1_000, 3_000),
}


@pytest.mark.parametrize("change", CHANGES)
def test_every_change_makes_the_next_prepare_answer_anew(
    manager: ChatHistoryManager, make_manager: Callable[..., ChatHistoryManager], change: str
) -> None:
    before = prepare(manager).compaction
    CHANGES[change](manager)
    after = prepare(manager).compaction
    assert after is not before
    assert after == fresh(make_manager)


def test_deleting_the_summary_brings_the_proposal_back(
    manager: ChatHistoryManager, make_manager: Callable[..., ChatHistoryManager]
) -> None:
    proposal = prepare(manager).compaction
    assert proposal is not None
    history.save_summary(manager, KEY, "so far", proposal.through_id)
    covered = prepare(manager).compaction
    history.delete_summary(manager, KEY)
    after = prepare(manager).compaction
    assert after is not covered and after == fresh(make_manager) == proposal


def test_another_process_editing_makes_the_next_prepare_answer_anew(
    manager: ChatHistoryManager, make_manager: Callable[..., ChatHistoryManager]
) -> None:
    before = prepare(manager).compaction
    other = make_manager(SETTINGS)  # another connection to the same file
    edits.edit_message(
        other, KEY, first_row_id(other), MessageEdit(content="QUESTION 0 " + "Q" * 300)
    )
    after = prepare(manager).compaction
    assert after is not before and after == fresh(make_manager)
    assert after is not None and "QUESTION 0" in str(after.request.body)


def test_retention_and_settings_make_the_next_prepare_answer_anew(
    manager: ChatHistoryManager, make_manager: Callable[..., ChatHistoryManager]
) -> None:
    before = prepare(manager).compaction
    smaller = {**SETTINGS, "maxMessages": 30}
    from chat_history.settings import load_settings

    manager = manager.under(load_settings(smaller).settings)  # retention deletes the oldest turns
    after = prepare(manager).compaction
    assert after is not before and after == fresh(make_manager, smaller)
    tighter = attrs.evolve(
        manager.settings,
        context=attrs.evolve(manager.settings.context, compaction_max_summary_tokens=200),
    )
    manager = manager.under(tighter)
    assert prepare(manager).compaction == fresh(make_manager, tighter)
