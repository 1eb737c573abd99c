"""A state machine over the manager on a real SQLite file (protocol.md "Version 2" → Edit,
rewind, branch; semantics.md "Rewinding and turn numbers"): random appends, truncates,
deleteTurns, edits, forks, summaries, titles, clears and retention, checked against a small
in-memory model built on the pure rules (policy.rewind, policy.titles, policy.retention,
policy.prepare.context). After every step ``get`` and ``prepare`` (its body) agree with the model,
the listing agrees with it, and no body holds a tool result without its call.

The model's settings make ``prepare`` leave old turns unread (maxHistoryTurns 2), so its answer
comes from the recorded turn figures, which the edits must keep true."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tests.conftest import Databases
from tests.unit.conftest import FixedClock, settings_from

from chat_history.errors import InvalidParams
from chat_history.model import Key, Message, StoredMessage, Summary, ToolCall
from chat_history.policy.budget import resolve_route
from chat_history.policy.prepare.collapse import turn_figures
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import RequestOptions
from chat_history.policy.recording import truncate_tool_result
from chat_history.policy.retention import plan_retention
from chat_history.policy.rewind import (
    edited_content,
    fork_end,
    plan_delete_turns,
    plan_truncate,
)
from chat_history.policy.titles import auto_title, fork_title
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user
from chat_history.providers import format_body
from chat_history.service import conversations, edits, history
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions
from chat_history.store import HistoryStore, Store
from chat_history.store.postgres import PostgresStore
from chat_history.store.schema import FIGURES

KEYS = (Key("w1", "a"), Key("w1", "b"), Key("w2", "a"))
SETTINGS = settings_from(
    {"maxMessages": 14, "maxToolResultChars": 40, "context": {"maxHistoryTurns": 2}}
)
ROUTE = resolve_route("openai", None, SETTINGS)
WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "   ", "long " * 12])


@attrs.define
class Conversation:
    rows: list[StoredMessage] = attrs.Factory(list)
    summary: Summary | None = None
    title: str | None = None
    metadata: dict[str, Any] = attrs.Factory(dict)
    #: the turn a following row joins (the store's totals: a deletion sets it to the highest
    #: remaining turn, retention leaves it)
    last_turn: int = 0

    @property
    def exists(self) -> bool:
        return bool(self.rows or self.summary or self.title is not None or self.metadata)


def block(kind: str, text: str, calls: int, serial: int) -> list[Message]:
    """One piece of a turn as an agent writes it."""
    if kind == "prompt":
        return [Message(role="user", content=f"{text} {serial}")]
    if kind == "reply":
        return [Message(role="assistant", content=f"reply {text} {serial}")]
    if kind == "system":
        return [Message(role="system", content=f"system {serial}")]
    if kind == "feedback":
        return [Message(role="user", content=f"[Tool results] {text} {serial}")]
    ids = [f"k{serial}_{i}" for i in range(calls)]
    carrier = Message(
        role="assistant",
        content="",
        tool_calls=tuple(ToolCall(id=i, name="read", arguments={"n": serial}) for i in ids),
    )
    results = [
        Message(role="tool", content=f"result {text} {i} " * 3, tool_call_id=i, name="read")
        for i in ids
    ]
    return [carrier, *results]


BLOCK = st.tuples(
    st.sampled_from(["prompt", "prompt", "reply", "tools", "system", "feedback"]),
    WORDS,
    st.integers(1, 2),
)


def orphans(body: dict[str, Any]) -> list[str]:
    """Tool results in an OpenAI body whose call no earlier assistant message made."""
    called: set[str] = set()
    lost: list[str] = []
    for message in body["messages"]:
        for call in message.get("tool_calls") or []:
            called.add(call["id"])
        if message["role"] == "tool" and message["tool_call_id"] not in called:
            lost.append(message["tool_call_id"])
    return lost


class ConversationsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FixedClock()
        self.folder: Path | None = None
        self.store: HistoryStore
        if SHARED[0] is None:  # SQLite: a fresh file per run
            self.folder = Path(tempfile.mkdtemp(prefix="chat-history-state-"))
            self.store = Store(self.folder)
        else:  # PostgreSQL: the test's database, emptied by each run's teardown
            self.store = SHARED[0]
        self.manager = ChatHistoryManager(self.store, SETTINGS, clock=self.clock)
        self.model = {key: Conversation() for key in KEYS}
        self.serial = itertools.count(1)
        self.highest_id = 0

    def teardown(self) -> None:
        if self.folder is None:
            for key in KEYS:
                history.clear(self.manager, key)
            return
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- the model's retention (what every append, get and prepare runs first) --------------

    def retain(self, key: Key) -> None:
        conversation = self.model[key]
        plan = plan_retention(conversation.rows, SETTINGS, self.clock.now)
        conversation.rows = [r for r in conversation.rows if r.id not in plan.delete_ids]

    # -- rules --------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        self.clock.now += 1

    @rule(key=st.sampled_from(KEYS), blocks=st.lists(BLOCK, min_size=1, max_size=3))
    def append(self, key: Key, blocks: list[tuple[str, str, int]]) -> None:
        self.clock.now += 1
        messages = [
            m for kind, text, calls in blocks for m in block(kind, text, calls, next(self.serial))
        ]
        stored = history.append(self.manager, key, messages).messages
        conversation = self.model[key]
        for message, row in zip(messages, stored, strict=True):
            conversation.last_turn += 1 if is_real_user(message) else 0
            assert row.turn == conversation.last_turn
            assert row.id > self.highest_id
            self.highest_id = row.id
            if message.role == "tool":  # cut when recorded, as an edit cuts it
                limit = SETTINGS.max_tool_result_chars
                message = attrs.evolve(
                    message, content=truncate_tool_result(message.content, limit)
                )
            assert row.content == message.content and row.tokens == stored_tokens(message)
            conversation.rows.append(row)
        self.retain(key)

    @precondition(lambda self: any(c.rows for c in self.model.values()))
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from([k for k in KEYS if self.model[k].rows]))
        conversation = self.model[key]
        row = data.draw(st.sampled_from(conversation.rows))
        self.clock.now += 1
        cover = conversation.summary.covers_through_id if conversation.summary else None
        plan = plan_truncate(conversation.rows, row.id, cover)
        result = edits.truncate(self.manager, key, row.id)
        assert result.deleted_messages == len(plan.deleted)
        assert result.summary_deleted == plan.summary_deleted
        conversation.rows = list(plan.remaining)
        conversation.last_turn = max((r.turn for r in conversation.rows), default=0)
        if plan.summary_deleted:
            conversation.summary = None

    @rule(key=st.sampled_from(KEYS), turns=st.lists(st.integers(0, 12), min_size=1, max_size=3))
    def delete_turns(self, key: Key, turns: list[int]) -> None:
        conversation = self.model[key]
        self.clock.now += 1
        plan = plan_delete_turns(conversation.rows, turns)
        result = edits.delete_turns(self.manager, key, turns)
        assert (result.deleted_messages, result.deleted_turns) == (
            len(plan.deleted),
            plan.deleted_turns,
        )
        if plan.deleted:
            gone = {r.id for r in plan.deleted}
            conversation.rows = [r for r in conversation.rows if r.id not in gone]
            conversation.last_turn = max((r.turn for r in conversation.rows), default=0)

    @rule(key=st.sampled_from(KEYS), turns=st.lists(st.integers(-3, 5), min_size=1, max_size=3))
    def delete_turns_refused(self, key: Key, turns: list[int]) -> None:
        if all(t >= 0 for t in turns):
            return
        with pytest.raises(InvalidParams) as caught:
            edits.delete_turns(self.manager, key, turns)
        assert caught.value.field.startswith("turns[")

    @precondition(lambda self: any(c.rows for c in self.model.values()))
    @rule(data=st.data(), text=WORDS, flip=st.booleans(), tag=st.integers(0, 3))
    def edit(self, data: st.DataObject, text: str, flip: bool, tag: int) -> None:
        key = data.draw(st.sampled_from([k for k in KEYS if self.model[k].rows]))
        conversation = self.model[key]
        index = data.draw(st.integers(0, len(conversation.rows) - 1))
        row = conversation.rows[index]
        content = f"edited {text} " * 4
        if row.role == "user" and is_real_user(row) == flip:
            content = f"[Tool results] {content}"  # keeps or flips the row's realness
        self.clock.now += 1
        try:
            expected = edited_content(row, content, SETTINGS.max_tool_result_chars)
        except InvalidParams:
            with pytest.raises(InvalidParams) as caught:
                edits.edit_message(self.manager, key, row.id, MessageEdit(content=content))
            assert caught.value.field == "content"
            return
        edited = edits.edit_message(
            self.manager, key, row.id, MessageEdit(content=content, metadata={"tag": tag})
        )
        want = attrs.evolve(row, content=expected, metadata={"tag": tag})
        fresh = Message(**{f.name: getattr(want, f.name) for f in attrs.fields(Message)})
        want = attrs.evolve(want, tokens=stored_tokens(fresh))
        assert edited == want
        conversation.rows[index] = want

    @rule(key=st.sampled_from(KEYS), other=st.integers(1, 10_000))
    def edit_unknown_id(self, key: Key, other: int) -> None:
        if any(r.id == other for r in self.model[key].rows):
            return
        with pytest.raises(InvalidParams) as caught:
            edits.edit_message(self.manager, key, other, MessageEdit(content="x"))
        assert caught.value.field == "id"

    @rule(data=st.data(), into=st.sampled_from(KEYS), whole=st.booleans())
    def fork(self, data: st.DataObject, into: Key, whole: bool) -> None:
        target = into
        source = data.draw(st.sampled_from(KEYS))
        src = self.model[source]
        through = None if whole or not src.rows else data.draw(st.sampled_from(src.rows)).id
        self.clock.now += 1
        if self.model[target].exists or not src.rows:
            with pytest.raises(InvalidParams) as caught:
                conversations.fork(self.manager, source, target, through)
            field = "new_conversation_id" if self.model[target].exists else "conversation_id"
            assert caught.value.field == field
            return
        info = conversations.fork(self.manager, source, target, through)
        end = None if through is None else fork_end(src.rows, through)
        copied = [r for r in src.rows if end is None or r.id <= end]
        rows = list(history.get(self.manager, target).messages)
        assert len(rows) == len(copied)
        for old, new in zip(copied, rows, strict=True):
            assert new.id > self.highest_id
            self.highest_id = new.id
            assert attrs.evolve(new, id=old.id) == old
        model = self.model[target]
        model.rows = rows
        model.last_turn = max((r.turn for r in rows), default=0)
        model.metadata = dict(src.metadata)
        model.title = None if src.title is None else fork_title(src.title)
        # The summary's copy covers the copy of the newest copied row at or before its coverage,
        # when that coverage lies within the copy (checked row by row, not by the store's count).
        covers = src.summary.covers_through_id if src.summary else None
        mapped = [
            new.id
            for old, new in zip(copied, rows, strict=True)
            if covers is not None and old.id <= covers
        ]
        within = covers is not None and bool(copied) and covers <= copied[-1].id
        cover = mapped[-1] if within and mapped else None
        if src.summary is not None and cover is not None:
            model.summary = attrs.evolve(src.summary, covers_through_id=cover)
        assert info.message_count == len(rows) and info.has_summary == (model.summary is not None)

    @rule(key=st.sampled_from(KEYS), data=st.data(), covered=st.booleans())
    def save_summary(self, key: Key, data: st.DataObject, covered: bool) -> None:
        rows = self.model[key].rows
        through = data.draw(st.sampled_from(rows)).id if covered and rows else None
        self.clock.now += 1
        saved = history.save_summary(self.manager, key, f"summary {next(self.serial)}", through)
        self.model[key].summary = saved

    @rule(key=st.sampled_from(KEYS))
    def delete_summary(self, key: Key) -> None:
        self.clock.now += 1
        assert history.delete_summary(self.manager, key) == (self.model[key].summary is not None)
        self.model[key].summary = None

    @rule(key=st.sampled_from(KEYS), title=st.sampled_from([None, "Named", "x" * 200]))
    def rename(self, key: Key, title: str | None) -> None:
        self.clock.now += 1
        conversations.update(self.manager, key, ConversationUpdate(set_title=True, title=title))
        if self.model[key].exists or title is not None:
            self.model[key].title = title

    @rule(key=st.sampled_from(KEYS), metadata=st.sampled_from([{}, {"pinned": True}]))
    def set_metadata(self, key: Key, metadata: dict[str, Any]) -> None:
        self.clock.now += 1
        conversations.update(self.manager, key, ConversationUpdate(metadata=metadata))
        self.model[key].metadata = dict(metadata)

    @rule(key=st.sampled_from(KEYS))
    def clear(self, key: Key) -> None:
        self.clock.now += 1
        assert history.clear(self.manager, key) == len(self.model[key].rows)
        self.model[key] = Conversation()

    # -- what must hold after every step ------------------------------------------------------

    @invariant()
    def reads_agree(self) -> None:
        for key in KEYS:
            conversation = self.model[key]
            got = history.get(self.manager, key)
            self.retain(key)
            assert list(got.messages) == conversation.rows, key
            assert got.summary == conversation.summary
            prepared = history.prepare(self.manager, key, PrepareOptions(provider="openai"))
            assert not orphans(prepared.body)
            readings = [
                prepare_rows(
                    conversation.rows,
                    RequestOptions(settings=SETTINGS.context, route=ROUTE, summary=summary),
                )
                for summary in (
                    conversation.summary,  # the summary stands in for the turns it covers
                    conversation.summary.summary if conversation.summary else None,
                )
            ]
            expected = [
                (
                    format_body("openai", r.rows, None, swept=True),
                    r.estimated_tokens,
                    r.trimmed,
                    r.collapsed_turns,
                )
                for r in readings
            ]
            got = (
                prepared.body,
                prepared.estimated_tokens,
                prepared.trimmed,
                prepared.collapsed_turns,
            )
            assert got in expected, key

    @invariant()
    def figures_are_true(self) -> None:
        """The recorded turn figures (what ``prepare`` counts for turns it does not read) are
        those of the turns as they now are: none for the running turn, each turn's own figures
        its rows', and the running sums between two recorded turns those of the turns between
        (a turn with no rows left counting nothing)."""
        width = len(FIGURES)
        with self.store.read() as tx:
            for key in KEYS:
                conversation = self.model[key]
                stored = {
                    r[0]: (r[1 : 1 + width], r[1 + width :])
                    for r in tx.connection.execute(
                        f"SELECT turn, {', '.join(FIGURES)}, "
                        f"{', '.join(f'earlier_{n}' for n in FIGURES)} FROM turn_figures "
                        "WHERE workspace = ? AND conversation = ? ORDER BY turn",
                        (key.workspace, key.conversation),
                    )
                }

                def own(turn: int, rows: list[StoredMessage]) -> tuple[int, ...]:
                    return turn_figures([r for r in rows if r.turn == turn]).as_tuple()

                for turn, (figures, _) in stored.items():
                    assert turn < conversation.last_turn, (key, turn)
                    assert tuple(figures) == own(turn, conversation.rows), (key, turn)
                turns = sorted(stored)
                for first, second in itertools.pairwise(turns):
                    between = [own(t, conversation.rows) for t in range(first, second)]
                    sums = tuple(stored[second][1][i] - stored[first][1][i] for i in range(width))
                    assert sums == tuple(map(sum, zip(*between, strict=True))), (key, first)

    @invariant()
    def listing_agrees(self) -> None:
        page = conversations.list_page(self.manager, None, None, None)
        listed = {Key(i.workspace, i.conversation_id): i for i in page.conversations}
        assert set(listed) == {k for k in KEYS if self.model[k].exists}
        for key, info in listed.items():
            conversation = self.model[key]
            title = conversation.title or auto_title(conversation.rows)
            assert info.title == title
            assert info.title_source == (
                "user" if conversation.title else "auto" if title else None
            )
            assert info.message_count == len(conversation.rows)
            assert info.tokens == sum(r.tokens for r in conversation.rows)
            assert info.has_summary == (conversation.summary is not None)
            assert info.metadata.value() == conversation.metadata
        activity = [i.last_activity or 0 for i in page.conversations]
        assert activity == sorted(activity, reverse=True)


#: The store every run shares on PostgreSQL (None: each run opens a SQLite file of its own).
SHARED: list[HistoryStore | None] = [None]


@pytest.mark.engines
def test_conversations_state_machine(databases: Databases | None, tmp_path: Path) -> None:
    """The machine on each engine; on PostgreSQL every run on one database (a fresh database per
    run costs seconds), which each run's teardown empties."""
    if databases is not None:
        SHARED[0] = PostgresStore(databases.url(tmp_path))
    try:
        run_state_machine_as_test(
            ConversationsMachine,
            settings=settings(
                max_examples=80,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        if SHARED[0] is not None:
            SHARED[0].close()
        SHARED[0] = None
