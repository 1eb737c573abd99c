"""``prepare`` reads only what a request can send (the newest turns, older system rows and the
stored figures of older turns) and answers exactly what preparing every row answers: the same
body, estimate, trim report, collapse counts and events, on random histories and settings."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_context_properties import TOOL_NAMES, context_settings, histories
from tests.conftest import Databases

from chat_history.errors import ContextOverflow, InvalidParams
from chat_history.model import Message, ToolCall, ToolSpec, Trimmed, resident_bytes
from chat_history.policy.budget import Route, resolve_route
from chat_history.policy.prepare.collapse import request_floor, turn_figures
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.turns import segment
from chat_history.providers import format_body
from chat_history.service import history, preparation, usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions
from chat_history.settings import ContextSettings, Settings, default_settings
from chat_history.store import HistoryStore, Key, Store
from chat_history.store.postgres import PostgresStore
from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, SCHEMA_VERSION

KEY = Key("ws", "conv")
T0 = 1_764_480_000_000
HOUR = 3_600_000

pytestmark = pytest.mark.engines


def request_rows(
    manager: ChatHistoryManager, route: Route, options: PrepareOptions
) -> preparation.RequestRows:
    """What ``prepare`` reads for ``KEY`` now (``preparation.request_rows`` in a snapshot)."""
    with manager.store.snapshot() as tx:
        return preparation.request_rows(tx, manager.settings, KEY, route, options)


def keep_everything(ctx: ContextSettings | None = None) -> Settings:
    """Retention that never deletes, so the stored rows are the rows appended."""
    return attrs.evolve(
        default_settings(),
        max_messages=1_000_000,
        max_tokens=0,
        max_age_hours=0,
        context=ctx or default_settings().context,
    )


def full_result(
    manager: ChatHistoryManager, options: PrepareOptions
) -> tuple[Any, tuple[Trimmed, ...]] | ContextOverflow:
    """What preparing every stored row answers (the reference)."""
    rows, summary = history.whole(manager, KEY)
    route = resolve_route(manager.settings.active_provider, None, manager.settings)
    try:
        out = prepare_rows(
            rows,
            preparation.request_options(
                manager.settings, route, options, summary=summary.summary if summary else None
            ),
        )
    except ContextOverflow as overflow:
        return overflow
    view = (
        format_body(route.kind, out.rows, route.model),
        out.estimated_tokens,
        out.budget,
        out.trimmed,
        out.collapsed_tool_rows,
        out.collapsed_turns,
    )
    return view, out.events


def windowed_result(
    manager: ChatHistoryManager, options: PrepareOptions, events: list[Trimmed]
) -> tuple[Any, tuple[Trimmed, ...]] | ContextOverflow:
    events.clear()
    try:
        out = history.prepare(manager, KEY, options)
    except ContextOverflow as overflow:
        return overflow
    view = (
        out.body,
        out.estimated_tokens,
        out.budget,
        out.trimmed,
        out.collapsed_tool_rows,
        out.collapsed_turns,
    )
    return view, tuple(events)


def assert_same(
    manager: ChatHistoryManager, options: PrepareOptions, events: list[Trimmed]
) -> None:
    windowed = windowed_result(manager, options, events)
    full = full_result(manager, options)
    if isinstance(full, ContextOverflow):
        assert isinstance(windowed, ContextOverflow)
        assert (windowed.estimated_tokens, windowed.context_window) == (
            full.estimated_tokens,
            full.context_window,
        )
    else:
        assert windowed == full


#: The engine's store over a folder's database (``engine_stores`` sets it for the test).
OPEN_STORE: list[Callable[[Path], HistoryStore]] = [Store]
#: On PostgreSQL, the one folder (database) of a property's examples; None on SQLite.
EXAMPLES: list[Path | None] = [None]


@pytest.fixture(autouse=True)
def engine_stores(databases: Databases | None, tmp_path: Path) -> Iterator[None]:
    """``open_manager`` on the test's engine (the module is marked ``engines``)."""
    if databases is not None:
        OPEN_STORE[0] = lambda folder: PostgresStore(databases.url(folder))
        EXAMPLES[0] = tmp_path / "examples"
    try:
        yield
    finally:
        OPEN_STORE[0], EXAMPLES[0] = Store, None


@contextlib.contextmanager
def example_folder() -> Iterator[Path]:
    """The folder of one example of a property, its database empty: a fresh SQLite file, or on
    PostgreSQL the test's one database, ``KEY`` cleared after the example (a database per
    example costs seconds)."""
    if EXAMPLES[0] is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp)
        return
    try:
        yield EXAMPLES[0]
    finally:
        store = OPEN_STORE[0](EXAMPLES[0])
        try:
            with store.write() as tx:
                tx.clear(KEY)
        finally:
            store.close()


def open_manager(folder: Path, settings: Settings, events: list[Trimmed]) -> ChatHistoryManager:
    return ChatHistoryManager(
        OPEN_STORE[0](folder),
        settings,
        notify=lambda key, batch: events.extend(batch),
        clock=lambda: T0,
    )


def append_in_pieces(
    manager: ChatHistoryManager, rows: Sequence[Message], sizes: list[int]
) -> None:
    """Append in batches of the drawn sizes: a turn completes within a batch or across two."""
    index = 0
    for size in sizes:
        if index >= len(rows):
            break
        history.append(manager, KEY, rows[index : index + size])
        index += size
    if index < len(rows):
        history.append(manager, KEY, rows[index:])


options_strategy = st.builds(
    PrepareOptions,
    tools=st.one_of(
        st.none(),
        st.lists(st.sampled_from(TOOL_NAMES[:2]), unique=True).map(
            lambda names: tuple(ToolSpec(name=n, description="d") for n in names)
        ),
    ),
    extra_tokens=st.integers(0, 300),
    overflow_recovery=st.booleans(),
    keep_tool_context_turns=st.one_of(st.none(), st.integers(0, 4)),
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
    st.lists(histories(), min_size=1, max_size=4),
    context_settings(),
    options_strategy,
    st.lists(st.integers(1, 6), max_size=30),
    st.one_of(st.none(), st.text(alphabet="ab ", max_size=40)),
)
def test_a_windowed_prepare_answers_what_preparing_every_row_answers(
    pieces: list[list[Message]],
    ctx: ContextSettings,
    options: PrepareOptions,
    batches: list[int],
    summary: str | None,
) -> None:
    # Several drawn histories back to back: longer conversations, so the window cuts often.
    rows = [row for piece in pieces for row in piece]
    if not rows:
        return
    events: list[Trimmed] = []
    with example_folder() as folder:
        manager = open_manager(folder, keep_everything(ctx), events)
        try:
            try:
                append_in_pieces(manager, rows, batches)
            except Exception:
                return
            if summary is not None:
                history.save_summary(manager, KEY, summary)
            assert_same(manager, options, events)
        finally:
            manager.store.close()


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str, *calls: str) -> Message:
    return Message(
        role="assistant",
        content=text,
        tool_calls=tuple(ToolCall(id=c, name="read_file", arguments={}) for c in calls),
    )


def T(call_id: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name="read_file")


def long_conversation(turns: int) -> list[Message]:
    rows: list[Message] = [Message(role="system", content="You are helpful.")]
    for i in range(turns):
        rows.append(U(f"question {i} " + "q" * 300))
        if i % 4 == 0:
            rows += [A("", f"c{i}"), T(f"c{i}", "result " + "r" * 300)]
        if i % 50 == 7:
            rows.append(Message(role="system", content=f"note {i}"))
        rows.append(A(f"answer {i} " + "a" * 300))
    return rows


def budget_settings(**context: Any) -> Settings:
    return keep_everything(attrs.evolve(default_settings().context, **context))


def test_a_long_conversation_is_prepared_from_its_newest_turns(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=4_000), events)
    history.append(manager, KEY, long_conversation(600))
    route = resolve_route("openai", None, manager.settings)

    rows, omitted, _ = request_rows(manager, route, PrepareOptions())

    assert omitted is not None and omitted.within_limit.turns > 0
    assert len(rows) < 100  # of 1,800 stored: what the budget can hold, plus the system rows
    assert sum(1 for r in rows if r.role == "system") == 13
    assert_same(manager, PrepareOptions(), events)
    assert [e.reason for e in events] == ["turnLimit", "tokenBudget"]


def test_the_turn_limit_alone_bounds_what_is_read(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    manager = open_manager(
        tmp_path, budget_settings(max_context_tokens=0, max_history_turns=5), events
    )
    history.append(manager, KEY, long_conversation(200))
    route = resolve_route("openai", None, manager.settings)

    _, omitted, _ = request_rows(manager, route, PrepareOptions())

    assert omitted is not None and omitted.beyond_limit.turns == 195
    assert omitted.within_limit.turns == 0
    assert_same(manager, PrepareOptions(), events)


def test_turns_deleted_by_retention_leave_the_window_exact(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    settings = attrs.evolve(budget_settings(max_context_tokens=3_000), max_messages=300)
    manager = open_manager(tmp_path, settings, events)
    rows = long_conversation(400)
    for start in range(0, len(rows), 60):
        history.append(manager, KEY, rows[start : start + 60])
    route = resolve_route("openai", None, manager.settings)

    assert request_rows(manager, route, PrepareOptions())[1] is not None
    assert_same(manager, PrepareOptions(), events)


def test_two_connections_appending_in_turn_keep_the_figures_exact(tmp_path: Path) -> None:
    # Each connection remembers the running sums of the turns it recorded; the other's writes
    # must make it read them again, or the figures drift and the window falls back (or lies).
    events: list[Trimmed] = []
    settings = budget_settings(max_context_tokens=3_000)
    first = open_manager(tmp_path, settings, events)
    second = open_manager(tmp_path, settings, events)
    rows = long_conversation(120)
    for index, row in enumerate(rows):
        history.append(first if (index // 3) % 2 else second, KEY, [row])
    route = resolve_route("openai", None, settings)
    for manager in (first, second):
        assert request_rows(manager, route, PrepareOptions())[1] is not None
        assert_same(manager, PrepareOptions(), events)
    with first.store.read() as transaction:
        recorded = transaction.connection.execute(
            "SELECT turns, earlier_turns, spoken_rows, earlier_spoken_rows FROM turn_figures "
            "ORDER BY turn"
        ).fetchall()
    assert [(turns, earlier) for turns, earlier, _, _ in recorded] == [
        (1, n) for n in range(len(recorded))
    ]
    spoken = [own for _, _, own, _ in recorded]
    assert [earlier for _, _, _, earlier in recorded] == [
        sum(spoken[:n]) for n in range(len(spoken))
    ]


def test_a_turn_deleted_out_of_order_falls_back_to_every_row(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=2_000), events)
    history.append(manager, KEY, long_conversation(120))
    with manager.store.write() as transaction:
        ids = [
            r[0]
            for r in transaction.connection.execute(
                "SELECT id FROM messages WHERE turn = 30 AND role != 'system'"
            )
        ]
        transaction.delete_rows(KEY, ids)
    route = resolve_route("openai", None, manager.settings)

    assert request_rows(manager, route, PrepareOptions())[1] is None
    assert_same(manager, PrepareOptions(), events)


def test_prompt_mode_calls_with_tool_names_fall_back_to_every_row(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=1_000), events)
    prompt_call = Message(role="assistant", content='<tool_call>{"name": "grep"}</tool_call>')
    rows = [U("first"), prompt_call, U("[Tool results] none"), A("done")]
    history.append(manager, KEY, rows + long_conversation(80)[1:])
    options = PrepareOptions(tools=(ToolSpec(name="read_file"),))
    route = resolve_route("openai", None, manager.settings)

    assert request_rows(manager, route, options)[1] is None
    assert_same(manager, options, events)
    assert request_rows(manager, route, PrepareOptions())[1] is not None
    assert_same(manager, PrepareOptions(), events)


@pytest.mark.sqlite_only  # a version 1 SQLite file
def test_a_version_1_database_keeps_its_rows_and_is_prepared_in_full(tmp_path: Path) -> None:
    legacy = sqlite3.connect(tmp_path / DATABASE_FILE)
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 1")
    # Two turns as a version 1 server wrote them: the first is complete and has no figures.
    legacy.executemany(
        "INSERT INTO messages (workspace, conversation, turn, role, content, timestamp, tokens) "
        "VALUES ('ws', 'conv', ?, ?, ?, ?, 7)",
        [
            (1, "user", "old question", T0),
            (1, "assistant", "old answer", T0),
            (2, "user", "q2", T0),
        ],
    )
    legacy.execute("INSERT INTO conversations VALUES ('ws', 'conv', 3, 21, 2, 3, ?, ?)", (T0, T0))
    legacy.commit()
    legacy.close()

    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=2_000), events)
    added = long_conversation(60)[1:]
    history.append(manager, KEY, added)

    stored = history.get(manager, KEY).messages
    assert [r.content for r in stored] == [
        "old question",
        "old answer",
        "q2",
        *(r.content for r in added),
    ]
    with manager.store.read() as transaction:
        assert transaction.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    route = resolve_route("openai", None, manager.settings)
    assert request_rows(manager, route, PrepareOptions())[1] is None  # turn 1 has none
    assert_same(manager, PrepareOptions(), events)


@settings(
    deadline=None, max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(histories())
def test_the_floor_never_exceeds_what_a_turn_sends(rows: list[Message]) -> None:
    """request_floor is a lower bound of each turn's non-system estimate as prepare sends it,
    and turn_figures counts what a collapse keeps and leaves out."""
    for turn in segment(rows).turns:
        figures = turn_figures(turn.rows)
        spoken = [r for r in turn.rows if r.role != "system"]
        assert figures.kept_rows + figures.collapsed_rows == figures.spoken_rows == len(spoken)
        assert request_floor(turn.rows) <= figures.sent_tokens
        assert request_floor(turn.rows) <= figures.spoken_tokens


@pytest.mark.parametrize("turns", [1, 3, 60])
def test_short_and_long_conversations_alike(tmp_path: Path, turns: int) -> None:
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=1_500), events)
    for row in long_conversation(turns):
        history.append(manager, KEY, [row])
    assert_same(manager, PrepareOptions(), events)
    assert_same(manager, PrepareOptions(overflow_recovery=True, extra_tokens=200), events)


# -- what a connection remembers of the newest rows ---------------------------------------------


def assert_same_as_a_fresh_reader(
    manager: ChatHistoryManager, folder: Path, events: list[Trimmed]
) -> None:
    """The windowed prepare of ``manager`` (which may serve rows it remembers) equals preparing
    every row read by a connection that remembers nothing."""
    fresh = open_manager(folder, manager.settings, [])
    try:
        assert windowed_result(manager, PrepareOptions(), events) == full_result(
            fresh, PrepareOptions()
        )
        for limit in (1, 7):  # the newest page comes through the same remembered rows
            page, expected = (
                history.get(manager, KEY, limit=limit),
                history.get(fresh, KEY, limit=limit),
            )
            assert (page.messages, page.has_more) == (expected.messages, expected.has_more)
    finally:
        fresh.store.close()


def sent_contents(manager: ChatHistoryManager) -> list[str]:
    body = history.prepare(manager, KEY, PrepareOptions()).body
    messages = body["messages"]
    assert isinstance(messages, list)
    return [m["content"] for m in messages if isinstance(m.get("content"), str)]


def test_rows_another_connection_appends_reach_the_next_prepare(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    settings = budget_settings(max_context_tokens=3_000)
    reader = open_manager(tmp_path, settings, events)
    writer = open_manager(tmp_path, settings, [])
    history.append(writer, KEY, long_conversation(60))
    assert_same_as_a_fresh_reader(reader, tmp_path, events)  # reader now remembers the tail
    history.append(writer, KEY, [U("from the other window"), A("its answer")])
    assert sent_contents(reader)[-2:] == ["from the other window", "its answer"]
    assert_same_as_a_fresh_reader(reader, tmp_path, events)


def test_rows_another_connection_deletes_never_come_back(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    settings = budget_settings(max_context_tokens=3_000)
    reader = open_manager(tmp_path, settings, events)
    writer = open_manager(tmp_path, settings, [])
    history.append(writer, KEY, long_conversation(40))
    assert_same_as_a_fresh_reader(reader, tmp_path, events)
    history.clear(writer, KEY)
    history.append(writer, KEY, [U("a new start"), A("fresh")])
    assert sent_contents(reader) == ["a new start", "fresh"]
    pruning = open_manager(tmp_path, attrs.evolve(settings, max_messages=30), [])
    history.append(pruning, KEY, long_conversation(30)[1:])  # retention deletes the oldest turns
    assert "a new start" not in sent_contents(reader)
    assert_same_as_a_fresh_reader(reader, tmp_path, events)


def test_own_appends_and_retention_keep_the_remembered_rows_exact(tmp_path: Path) -> None:
    events: list[Trimmed] = []
    settings = attrs.evolve(budget_settings(max_context_tokens=3_000), max_messages=200)
    manager = open_manager(tmp_path, settings, events)
    rows = long_conversation(150)
    for start in range(0, len(rows), 7):
        history.append(manager, KEY, rows[start : start + 7])
        if start % 21 == 0:
            assert_same_as_a_fresh_reader(manager, tmp_path, events)
    assert_same_as_a_fresh_reader(manager, tmp_path, events)


def test_a_bounded_memory_of_rows_reads_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chat_history.store import tail as remembered

    monkeypatch.setattr(remembered, "_RECENT_BYTES", 8_000)  # a handful of rows
    events: list[Trimmed] = []
    manager = open_manager(tmp_path, budget_settings(max_context_tokens=6_000), events)
    history.append(manager, KEY, long_conversation(80))
    for _ in range(3):
        assert_same_as_a_fresh_reader(manager, tmp_path, events)
        history.append(manager, KEY, [U("one more " + "x" * 900), A("ok " + "y" * 900)])
    tail = manager.store._tails[KEY]
    assert tail.recent is not None and sum(map(resident_bytes, tail.recent)) <= 8_000


#: One step of two connections sharing a conversation: (which connection, what it does).
steps = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 9)),
            st.tuples(st.just("prepare"), st.just(0)),
            st.tuples(st.just("prune"), st.integers(4, 40)),
            st.tuples(st.just("clear"), st.just(0)),
        ),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    deadline=None,
    max_examples=60,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(steps, st.integers(1_500, 6_000))
def test_two_connections_in_any_order_never_see_a_stale_conversation(
    script: list[tuple[str, tuple[str, int]]], budget: int
) -> None:
    # Whatever two connections do to one conversation, in whatever order, each one's prepare
    # (served partly from what it remembers) equals preparing every row as a fresh reader sees
    # them; and the appends' turn numbers and pending calls follow the other's writes.
    source = long_conversation(200)
    with example_folder() as folder:
        settings_ = budget_settings(max_context_tokens=budget)
        events: list[Trimmed] = []
        managers = {  # b also prunes what it appends to (its own deletes)
            "a": open_manager(folder, settings_, events),
            "b": open_manager(folder, attrs.evolve(settings_, max_messages=60), events),
        }
        position = 0
        try:
            for who, (action, amount) in script:
                manager = managers[who]
                if action == "append":
                    rows = source[position : position + amount]
                    position += amount
                    # a tool row whose call was pruned or cleared away is refused
                    with contextlib.suppress(InvalidParams):
                        history.append(manager, KEY, rows)
                elif action == "prepare":
                    assert_same_as_a_fresh_reader(manager, folder, events)
                elif action == "prune":
                    pruner = open_manager(folder, attrs.evolve(settings_, max_messages=amount), [])
                    try:
                        usage.retain(pruner, KEY)
                    finally:
                        pruner.store.close()
                else:
                    history.clear(manager, KEY)
            for manager in managers.values():
                assert_same_as_a_fresh_reader(manager, folder, events)
        finally:
            for manager in managers.values():
                manager.store.close()
