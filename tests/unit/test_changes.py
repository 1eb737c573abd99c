"""What another process changed, told from fingerprints (policy.changes), and the change watch
over two real stores on one SQLite file (service.watch): others' writes found with their
reason, a process's own writes never, and a write never hiding what another did before it."""

from __future__ import annotations

import attrs
import pytest
from tests.unit.conftest import MakeStore

from chat_history.errors import ConversationChanged
from chat_history.model import ExpectedLast, Key, Message, ToolCall
from chat_history.policy.changes import Change, Fingerprint, Growth, changes, merge, reason
from chat_history.policy.rewind import fork_end, fork_through
from chat_history.service import conversations, edits, history, usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch
from chat_history.settings import default_settings

BASE = Fingerprint(
    last_id=10,
    first_id=1,
    count=10,
    tokens=100,
    last_activity=5,
    title=None,
    metadata=None,
    summary_at=None,
)
NONE = Growth(0, 0)

pytestmark = pytest.mark.engines


@pytest.mark.parametrize(
    ("after", "growth", "why"),
    [
        (
            attrs.evolve(BASE, last_id=12, count=12, tokens=120, last_activity=6),
            Growth(2, 20),
            "append",
        ),
        (attrs.evolve(BASE, last_id=8, count=8, tokens=80, last_activity=6), NONE, "delete"),
        (attrs.evolve(BASE, count=9, tokens=90, last_activity=6), NONE, "delete"),
        # the newest row went in the same millisecond as the last write: still a rewind
        (attrs.evolve(BASE, last_id=9, count=9, tokens=90), NONE, "delete"),
        (attrs.evolve(BASE, first_id=3, count=8, tokens=80), NONE, "retention"),
        (
            attrs.evolve(BASE, last_id=11, first_id=3, count=9, tokens=100, last_activity=6),
            Growth(1, 20),
            "retention",
        ),
        (
            attrs.evolve(BASE, last_id=11, count=9, tokens=100, last_activity=6),
            Growth(1, 20),
            "delete",
        ),
        (attrs.evolve(BASE, tokens=104, last_activity=6), NONE, "edit"),
        (attrs.evolve(BASE, last_activity=6), NONE, "edit"),
        (attrs.evolve(BASE, summary_at=6, last_activity=6), NONE, "summary"),
        (attrs.evolve(BASE, title="Named", last_activity=6), NONE, "title"),
        (attrs.evolve(BASE, metadata='{"pinned":true}', last_activity=6), NONE, "title"),
        (None, NONE, "clear"),
        (BASE, NONE, None),
    ],
)
def test_the_reason_of_a_change(after: Fingerprint | None, growth: Growth, why: str) -> None:
    assert reason(BASE, after, growth) == why


def test_a_new_conversation_is_an_append_or_its_summary_or_title() -> None:
    assert reason(None, BASE, NONE) == "append"
    empty = attrs.evolve(BASE, last_id=None, first_id=None, count=0, tokens=0)
    assert reason(None, attrs.evolve(empty, summary_at=3), NONE) == "summary"
    assert reason(None, attrs.evolve(empty, title="t"), NONE) == "title"
    assert reason(None, None, NONE) is None


def test_changes_and_their_merge_name_each_conversation_once() -> None:
    after = {"a": attrs.evolve(BASE, last_id=11, count=11, tokens=110), "b": BASE}
    found = changes({"a": BASE, "b": BASE, "c": BASE}, after, {"a": Growth(1, 10)})
    assert found == [Change("a", 11, "append"), Change("c", None, "clear")]
    merged = merge([Change("a", 11, "append"), Change("b", 3, "title"), Change("a", 9, "delete")])
    assert merged == [Change("a", 9, "delete"), Change("b", 3, "title")]


CALL = ToolCall(id="a", name="read_file")


def test_fork_end_carries_a_cut_inside_a_tool_exchange_through_its_answers() -> None:
    from chat_history.model import StoredMessage

    def row(i: int, **fields: object) -> StoredMessage:
        return StoredMessage.of(Message(**fields), id=i, turn=1, tokens=1, timestamp=0)  # type: ignore[arg-type]

    rows = [
        row(1, role="user", content="go"),
        row(2, role="assistant", tool_calls=(CALL, ToolCall(id="b", name="x"))),
        row(3, role="tool", tool_call_id="a", content="A"),
        row(4, role="tool", tool_call_id="b", content="B"),
        row(5, role="assistant", content="done"),
    ]
    assert [fork_end(rows, i) for i in (1, 2, 3, 4, 5)] == [1, 4, 4, 4, 5]
    assert fork_through(5, 2, rows) == 4, "fork's rule carries a call row through its answers"


# -- the watch over two stores on one file ------------------------------------------------------

W = "file:///w"


def managers(make_store: MakeStore) -> tuple[ChatHistoryManager, ChatHistoryManager, ChangeWatch]:
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    mine = ChatHistoryManager(make_store(), settings)
    other = ChatHistoryManager(make_store(), settings)
    return mine, other, ChangeWatch(mine.store, lambda: W)


def say(manager: ChatHistoryManager, conversation: str, text: str) -> int:
    stored = history.append(
        manager,
        Key(W, conversation),
        [Message(role="user", content=text), Message(role="assistant", content="ok " + text)],
    )
    return stored.messages[-1].id


def test_the_watch_tells_others_changes_with_their_reason(make_store: MakeStore) -> None:
    _, other, watch = managers(make_store)
    say(other, "c", "one")
    assert watch.poll() == []  # the first look is the baseline
    last = say(other, "c", "two")
    assert watch.poll() == [Change("c", last, "append")]
    assert watch.poll() == []
    edits.truncate(other, Key(W, "c"), last)
    assert watch.poll() == [Change("c", last - 1, "delete")]
    history.clear(other, Key(W, "c"))
    assert watch.poll() == [Change("c", None, "clear")]
    newest = say(other, "elsewhere", "x")
    history.append(other, Key("file:///another", "c"), [Message(role="user", content="not ours")])
    assert watch.poll() == [Change("elsewhere", newest, "append")]


def test_own_writes_are_not_told_and_do_not_hide_anothers(make_store: MakeStore) -> None:
    mine, other, watch = managers(make_store)
    say(mine, "c", "one")
    watch.poll()
    say(mine, "c", "two")
    assert watch.poll() == []
    theirs = say(other, "c", "theirs")
    mine_after = say(mine, "c", "mine")  # a write right after another's: theirs still told
    assert watch.take() == [Change("c", theirs, "append")]
    assert watch.poll() == []
    assert mine_after > theirs


def test_an_unasked_write_is_told_as_anothers_would_be(make_store: MakeStore) -> None:
    """Issue 43 item 3: what this process writes with no request asking (the leases' upkeep
    ending an expired reply) is told to its own client; its requests' writes still are not."""
    mine, _, watch = managers(make_store)
    last = say(mine, "c", "one")
    watch.poll()
    with watch.unasked():
        edits.truncate(mine, Key(W, "c"), last)
        assert watch.take() == [Change("c", last - 1, "delete")]
    say(mine, "c", "two")
    assert watch.poll() == []


def test_a_stale_rewind_changes_nothing(make_store: MakeStore) -> None:
    mine, other, _ = managers(make_store)
    seen = say(mine, "c", "one")
    newest = say(other, "c", "two")
    with pytest.raises(ConversationChanged) as caught:
        edits.truncate(mine, Key(W, "c"), seen, ExpectedLast(seen))
    assert caught.value.last_id == newest
    assert len(history.get(mine, Key(W, "c")).messages) == 4
    with pytest.raises(ConversationChanged):
        edits.delete_turns(mine, Key(W, "c"), [1], ExpectedLast(None))
    edits.truncate(mine, Key(W, "c"), newest, ExpectedLast(newest))
    assert len(history.get(mine, Key(W, "c")).messages) == 3


def test_each_kind_of_change_by_another_process_is_told_with_its_reason(
    make_store: MakeStore,
) -> None:
    """Every write a client or retention makes, one at a time, through a second store on the
    same file, is found by the watch with the reason of the wire."""
    from chat_history.service.conversations import ConversationUpdate
    from chat_history.service.edits import MessageEdit

    _, other, watch = managers(make_store)
    key = Key(W, "c")
    clock = iter(range(1_000_000, 2_000_000, 1_000))
    other = attrs.evolve(other, clock=lambda: next(clock))  # each write at its own millisecond
    first = say(other, "c", "one")
    last = say(other, "c", "two")
    watch.poll()
    steps: list[tuple[str, object]] = [
        ("append", lambda: say(other, "c", "three")),
        ("edit", lambda: edits.edit_message(other, key, first, MessageEdit(content="edited text"))),
        ("edit", lambda: edits.edit_message(other, key, first, MessageEdit(metadata={"k": 1}))),
        ("summary", lambda: history.save_summary(other, key, "a summary", first)),
        ("summary", lambda: history.delete_summary(other, key)),
        (
            "title",
            lambda: conversations.update(
                other, key, ConversationUpdate(set_title=True, title="Named")
            ),
        ),
        ("title", lambda: conversations.update(other, key, ConversationUpdate(metadata={"m": 2}))),
        ("delete", lambda: edits.truncate(other, key, last + 1)),
        ("delete", lambda: edits.delete_turns(other, key, [1])),
        ("clear", lambda: history.clear(other, key)),
    ]
    for reason_, change in steps:
        change()  # type: ignore[operator]
        found = watch.poll()
        assert [c.reason for c in found] == [reason_], (reason_, found)
        rows = history.get(other, key).messages
        assert found[0].last_id == (rows[-1].id if rows else None)


def test_retention_by_another_process_is_told_as_retention(make_store: MakeStore) -> None:
    settings = attrs.evolve(default_settings(), max_messages=2)
    _, other, watch = managers(make_store)
    for n in range(3):
        say(other, "c", str(n))
    watch.poll()
    pruning = ChatHistoryManager(make_store(), settings)
    usage.retain(pruning, Key(W, "c"))
    assert [c.reason for c in watch.poll()] == ["retention"]
    # An append that retention trimmed in the same write took the oldest rows: retention too.
    history.append(pruning, Key(W, "c"), [Message(role="user", content="more")])
    assert [c.reason for c in watch.poll()] == ["retention"]


# -- version 4: replies in flight ---------------------------------------------------------------


def test_a_reply_that_grew_or_ended_is_reason_reply() -> None:
    from chat_history.policy.changes import reason as why

    streaming = attrs.evolve(BASE, reply=(10 << 32) + 1)
    grew = attrs.evolve(BASE, reply=(10 << 32) + 2)
    ended = attrs.evolve(BASE, tokens=140, last_activity=6)
    assert why(streaming, grew, NONE) == "reply"
    assert why(grew, ended, NONE) == "reply"  # its text and tokens moved: still the reply
    began = attrs.evolve(BASE, last_id=11, count=11, tokens=101, reply=(11 << 32) + 1)
    assert why(BASE, began, Growth(1, 1)) == "append"  # a new streaming row


def test_reply_changes_are_told_at_most_twice_a_second_per_conversation() -> None:
    from chat_history.policy.changes import REPLY_INTERVAL_S, pace

    told: dict[str, float] = {}
    first = [Change("c", 1, "reply"), Change("d", 2, "reply"), Change("e", 3, "edit")]
    assert pace(first, told, 100.0) == (first, [])
    again = [Change("c", 1, "reply"), Change("e", 3, "edit")]
    assert pace(again, told, 100.0 + REPLY_INTERVAL_S / 2) == (
        [Change("e", 3, "edit")],
        [Change("c", 1, "reply")],
    )
    assert pace(again, told, 100.0 + REPLY_INTERVAL_S) == (again, [])
