"""Every history operation keeps the fence (protocol.md "Version 5" → Provider state that stays
valid), on both engines: random histories of replies minted at many targets (Anthropic thinking
in tool loops, Responses reasoning, Gemini signatures, DeepSeek reasoning text), with random
operations among them — summaries, native compactions, edits, forks, imports of an export,
deleted turns, rewinds, revocations — and checks for random targets (another model, provider,
endpoint or scope) under a roomy and a tight budget: no body carries state the simulated
provider refuses, an injected refusal is recovered by one report and one prepare, and every
piece of state the target would take is in the body whenever its row is."""

from __future__ import annotations

import itertools

import pytest
import state_oracle as oracle
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from state_replay import MODES, Clock, History

from chat_history.model import Key
from chat_history.service.manager import ChatHistoryManager

pytestmark = pytest.mark.engines

TARGETS = sorted(oracle.ALIASES)
COMPACTING = sorted(t for t in TARGETS if oracle.kind_of(t) in ("openai-responses", "anthropic"))
fraction = st.floats(0, 1)
OPERATION = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(TARGETS), st.integers(0, 2), st.integers(1, 2)),
    st.tuples(st.just("summary"), fraction),
    st.tuples(st.just("compaction"), st.sampled_from(COMPACTING), fraction),
    st.tuples(st.just("edit"), fraction),
    st.tuples(st.just("fork")),
    st.tuples(st.just("import_")),
    st.tuples(st.just("delete_turn"), fraction),
    st.tuples(st.just("truncate"), fraction),
    st.tuples(st.just("revoke"), st.sampled_from(TARGETS)),
    st.tuples(st.just("check"), st.sampled_from(TARGETS), st.sampled_from(sorted(MODES))),
)
_RUNS = itertools.count()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.sampled_from(TARGETS),
    operations=st.lists(OPERATION, min_size=1, max_size=10),
    last=st.lists(
        st.tuples(st.sampled_from(TARGETS), st.sampled_from(sorted(MODES))), min_size=1, max_size=3
    ),
)
# Each operation with the targets it concerns, whatever the random examples draw.
@example(  # thinking minted before a summary that stands in stays out
    first="sonnet",
    operations=[("turn", "sonnet", 1, 1), ("summary", 0.3), ("turn", "sonnet", 0, 1)],
    last=[("sonnet", "roomy"), ("sonnet-dated", "tight")],
)
@example(  # a native compaction stands in at its origin only
    first="gpt",
    operations=[("turn", "gpt", 1, 2), ("compaction", "gpt", 0.4), ("turn", "gpt-mini", 0, 1)],
    last=[("gpt", "roomy"), ("gpt-mini", "roomy"), ("gpt-org2", "tight")],
)
@example(  # an Anthropic compaction block, then the same API with another model
    first="gw-sonnet",
    operations=[("turn", "gw-sonnet", 2, 1), ("compaction", "gw-sonnet", 0.5)],
    last=[("gw-sonnet", "roomy"), ("gw-sonnet-b", "roomy"), ("sonnet", "tight")],
)
@example(  # a revocation, reported once
    first="gw-sonnet",
    operations=[("turn", "gw-sonnet", 1, 2), ("revoke", "gw-sonnet"), ("turn", "gw-sonnet", 1, 1)],
    last=[("gw-sonnet", "roomy"), ("gw-sonnet", "tight")],
)
@example(  # a Gemini 3 the server cannot name: the missing signature reported once
    first="gem25",
    operations=[("turn", "gem25", 1, 1), ("revoke", "gem3"), ("turn", "gem3", 1, 2)],
    last=[("gem-tuned", "roomy"), ("gem3", "tight"), ("gem3-flash", "roomy")],
)
@example(  # forks, imports, edits and rewinds keep the origins
    first="sonnet",
    operations=[
        ("fork",),
        ("turn", "opus", 1, 1),
        ("import_",),
        ("edit", 0.5),
        ("turn", "deepseek", 0, 1),
        ("truncate", 0.9),
        ("delete_turn", 0.1),
    ],
    last=[("sonnet", "tight"), ("opus", "roomy"), ("deepseek", "roomy"), ("groq", "roomy")],
)
def test_every_operation_keeps_the_fence(make_store, first, operations, last) -> None:
    clock = Clock()
    manager = ChatHistoryManager(make_store(), oracle.settings(), clock=clock)
    run = History(manager, clock, key=Key("ws", f"run{next(_RUNS)}"))
    run.turn(first, 1, 2)
    checks = [("check", target, mode) for target, mode in last]
    for name, *args in [*operations, *checks]:
        if name != "check":
            getattr(run, name)(*args)
            continue
        outcome = run.check(*args)
        assert outcome.refused == [], (operations, outcome.refused)
        assert outcome.recovered == outcome.injected, operations
        assert outcome.kept == outcome.valid, (name, args, operations)
