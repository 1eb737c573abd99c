"""The settings barrier (protocol.md, "Settings are in force before any request runs"): which
settings a request runs under, over random interleavings of settings changes, pulls, answers and
requests, checked against the real retention policy on random histories."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.test_retention_properties import (
    messages_from,
    settings_strategy,
    steps_strategy,
    stored_rows,
)

from chat_history.policy.retention import plan_retention
from chat_history.settings import Settings, default_settings
from chat_history.wire.transport.barrier import SettingsBarrier, retention_held

BOUND = 10.0
NOW = 1_764_480_000_000 + 40 * 3_600_000

editor_settings = st.builds(
    lambda s, pruning: attrs.evolve(s, enable_auto_pruning=pruning),
    settings_strategy,
    st.booleans(),
)

#: What the editor and the client do, in any order: change a setting and push it
#: (didChangeConfiguration with the section), change one and notify (the server pulls), answer
#: one pending pull (with the editor's settings at that moment), send a request, let the server
#: run the oldest queued request (True: the newest pull is answered while it waits).
events = st.lists(
    st.one_of(
        st.tuples(st.just("push"), editor_settings),
        st.tuples(st.just("notify"), editor_settings),
        st.tuples(st.just("answer"), st.integers(0, 5)),
        st.tuples(st.just("request"), st.none()),
        st.tuples(st.just("run"), st.booleans()),
    ),
    max_size=40,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@attrs.define
class Queued:
    ticket: int
    #: the editor's settings from the request's arrival until it runs
    window: list[Settings]


def deleted(rows: Sequence[object], s: Settings) -> frozenset[int]:
    return plan_retention(rows, s, NOW).delete_ids  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    initial=editor_settings,
    pulls_first=st.booleans(),
    script=events,
    steps=steps_strategy,
)
def test_no_request_deletes_a_row_the_editors_settings_would_keep(
    initial: Settings, pulls_first: bool, script: list[tuple[str, object]], steps: list[object]
) -> None:
    rows = stored_rows(messages_from(steps))  # type: ignore[arg-type]
    clock = Clock()
    warnings: list[str] = []
    if pulls_first:
        # The client declares workspace.configuration and gave no initializationOptions.settings:
        # the server knows only its defaults until the first answer.
        barrier = SettingsBarrier(
            default_settings(), bound=BOUND, clock=clock, on_expired=lambda: warnings.append("w")
        )
        pending = [barrier.raise_()]
    else:
        barrier = SettingsBarrier(
            initial, bound=BOUND, clock=clock, on_expired=lambda: warnings.append("w")
        )
        pending = []
    truth = initial
    answered = 0  # every pull up to this one is answered
    queue: list[Queued] = []

    def editor_now(value: Settings) -> None:
        nonlocal truth
        truth = value
        for waiting in queue:
            waiting.window.append(value)

    def answer(pull: int) -> None:
        nonlocal answered
        pending.remove(pull)
        barrier.answer(pull, truth)
        answered = max(answered, pull)

    def run_oldest(answer_while_waiting: bool = False) -> None:
        job = queue.pop(0)
        stop = lambda: False  # noqa: E731
        if job.ticket > answered:
            if answer_while_waiting and pending and max(pending) >= job.ticket:
                newest = max(pending)

                def stop() -> bool:  # called by the waiting request: the answer arrives now
                    if newest in pending:
                        answer(newest)
                    return False

            else:
                clock.now += BOUND + 1  # nothing answered while it waited: the bound passes
        in_force = barrier.settings_for(job.ticket, stop)
        held = in_force == retention_held(in_force)
        assert held or in_force in job.window, "ran under settings the editor never held"
        removed = deleted(rows, in_force)
        assert any(removed <= deleted(rows, s) for s in job.window), (
            "deleted rows that the editor's settings keep"
        )
        if held:
            assert not removed

    for kind, value in script:
        clock.now += 0.5
        if kind == "push":
            assert isinstance(value, Settings)
            editor_now(value)
            barrier.push(value)
        elif kind == "notify":
            assert isinstance(value, Settings)
            editor_now(value)
            pending.append(barrier.raise_())
        elif kind == "answer" and pending:
            assert isinstance(value, int)
            answer(pending[value % len(pending)])
        elif kind == "request":
            queue.append(Queued(barrier.ticket(), [truth]))
        elif kind == "run" and queue:
            assert isinstance(value, bool)
            run_oldest(value)
    while queue:
        run_oldest()
    # One warning per wait that ran out, at most (each needs a request that waited).
    assert len(warnings) <= script.count(("request", None))


def test_a_waiting_request_runs_under_the_answer_that_arrives_while_it_waits() -> None:
    barrier = SettingsBarrier(default_settings(), bound=30.0)
    pull = barrier.raise_()
    ticket = barrier.ticket()
    answer = attrs.evolve(default_settings(), max_messages=4)
    got: list[Settings] = []
    waiter = threading.Thread(target=lambda: got.append(barrier.settings_for(ticket)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "the request did not wait for the pull's answer"
    barrier.answer(pull, answer)
    waiter.join(10)
    assert got == [answer]


def test_past_the_bound_requests_run_with_retention_held_and_one_warning() -> None:
    clock = Clock()
    warnings: list[str] = []
    known = attrs.evolve(default_settings(), max_messages=4)
    barrier = SettingsBarrier(
        known, bound=BOUND, clock=clock, on_expired=lambda: warnings.append("late")
    )
    pull = barrier.raise_()
    clock.now = BOUND
    first = barrier.settings_for(barrier.ticket())
    second = barrier.settings_for(barrier.ticket())
    assert first == second == retention_held(known)
    assert not first.enable_auto_pruning and first.max_tool_result_chars == 0
    assert first.max_messages == 4  # the known settings otherwise apply
    assert warnings == ["late"]
    barrier.answer(pull, None)  # a null answer: keeps the known settings, ends the hold
    assert barrier.settings_for(barrier.ticket()) == known
    assert not barrier.held


def test_a_request_that_arrived_before_the_pull_does_not_wait_for_it() -> None:
    known = attrs.evolve(default_settings(), max_messages=4)
    barrier = SettingsBarrier(known, bound=30.0)
    ticket = barrier.ticket()
    barrier.raise_()
    assert barrier.settings_for(ticket) == known


def test_a_cancelled_request_stops_waiting() -> None:
    barrier = SettingsBarrier(default_settings(), bound=30.0)
    barrier.raise_()
    stop = threading.Event()
    done = threading.Event()
    waiter = threading.Thread(
        target=lambda: (barrier.settings_for(barrier.ticket(), stop.is_set), done.set())
    )
    waiter.start()
    stop.set()
    barrier.wake()
    assert done.wait(10)
