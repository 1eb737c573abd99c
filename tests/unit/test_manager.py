"""The manager's core and the history family over it (protocol.md "Requests"): append answers one
stored row per message in order, get pages newest-first windows in order, listConversations sorts
by activity, clear deletes messages and summary; keys keep workspaces apart; a manager ``under``
other settings (one request's) shares the store and applies only its own."""

from __future__ import annotations

import attrs
import pytest
from rows import A, T, U

from chat_history.errors import InvalidParams
from chat_history.model import Attachment, Message, Summary, ToolCall
from chat_history.policy.tokens import stored_tokens
from chat_history.service import conversations, history, replies
from chat_history.store import Key

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")
T0 = 1_764_480_000_000
HOUR = 3_600_000


def contents(rows: tuple[Message, ...] | list[Message]) -> list[str]:
    return [row.content for row in rows]


# -- append ----------------------------------------------------------------------------------------


def test_append_returns_the_stored_rows_one_for_one_in_order(make_manager, clock) -> None:
    manager = make_manager()
    sent = [U(f"m{i}") if i % 2 == 0 else A(f"m{i}") for i in range(50)]

    result = history.append(manager, KEY, sent)

    assert contents(result.messages) == [f"m{i}" for i in range(50)]
    ids = [row.id for row in result.messages]
    assert ids == sorted(ids) and len(set(ids)) == 50
    assert {row.timestamp for row in result.messages} == {clock.now}
    assert result.pruned is None
    assert history.get(manager, KEY).messages == result.messages


def test_order_is_kept_within_one_millisecond_across_requests(make_manager) -> None:
    manager = make_manager()
    for i in range(10):
        history.append(manager, KEY, [U(f"q{i}"), A(f"a{i}")])
    rows = history.get(manager, KEY).messages
    assert contents(rows) == [text for i in range(10) for text in (f"q{i}", f"a{i}")]
    assert [row.id for row in rows] == sorted(row.id for row in rows)


def test_stored_rows_carry_turn_tokens_and_every_field(make_manager, clock) -> None:
    manager = make_manager()
    image = Attachment(mime_type="image/png", data="iVBORw0KGgo=")
    sent = [
        Message(role="system", content="rules"),
        U("look", attachments=(image,), metadata={"k": [1]}, timestamp=T0 - HOUR),
        Message(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="c1", name="read", arguments='{"p": 1}'),),
            provider_data={"anthropic": {"thinking": [{"signature": "s"}]}},
        ),
        T("c1", "result"),
    ]

    stored = history.append(manager, KEY, sent).messages

    assert [row.turn for row in stored] == [0, 1, 1, 1]
    assert [row.tokens for row in stored] == [stored_tokens(m) for m in sent]
    assert stored[1].timestamp == T0 - HOUR
    assert stored[0].timestamp == clock.now
    assert stored[1].attachments == (image,)
    assert stored[1].metadata == {"k": [1]}
    assert stored[2].tool_calls == (ToolCall(id="c1", name="read", arguments='{"p": 1}'),)
    assert stored[2].provider_data == {"anthropic": {"thinking": [{"signature": "s"}]}}
    assert (stored[3].tool_call_id, stored[3].name) == ("c1", "read_file")
    assert history.get(manager, KEY).messages == stored


def test_append_answers_rows_that_retention_deleted_in_the_same_request(make_manager) -> None:
    manager = make_manager({"maxMessages": 0})
    result = history.append(manager, KEY, [U("u1"), A("a1"), U("u2"), A("a2")])
    assert contents(result.messages) == ["u1", "a1", "u2", "a2"]
    assert result.pruned is not None
    assert (result.pruned.dropped_messages, result.pruned.retained_turns) == (2, 1)
    assert contents(history.get(manager, KEY).messages) == ["u2", "a2"]


def test_a_failing_append_changes_nothing(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("", "c1")])
    before = history.get(manager, KEY).messages
    with pytest.raises(InvalidParams):
        history.append(manager, KEY, [T("c1"), U("u2"), A("a2"), T("c9")])
    assert history.get(manager, KEY).messages == before
    assert conversations.list_page(manager, "ws", None, None).conversations[0].message_count == 2
    stored = history.append(manager, KEY, [T("c1")]).messages
    assert stored[0].turn == 1


# -- get -------------------------------------------------------------------------------------------


def ten_rows(manager) -> list[int]:
    rows = history.append(manager, KEY, [U(f"m{i}") for i in range(10)]).messages
    return [row.id for row in rows]


def test_get_without_limit_returns_the_whole_history(make_manager) -> None:
    manager = make_manager()
    ten_rows(manager)
    result = history.get(manager, KEY)
    assert contents(result.messages) == [f"m{i}" for i in range(10)]
    assert result.has_more is False
    assert result.summary is None
    assert result.pruned is None


def test_get_with_limit_returns_the_newest_rows_in_order(make_manager) -> None:
    manager = make_manager()
    ten_rows(manager)
    result = history.get(manager, KEY, limit=3)
    assert contents(result.messages) == ["m7", "m8", "m9"]
    assert result.has_more is True


def test_get_pages_back_with_before_id(make_manager) -> None:
    manager = make_manager()
    ids = ten_rows(manager)
    pages = []
    before = None
    while True:
        page = history.get(manager, KEY, limit=4, before_id=before)
        pages.append((contents(page.messages), page.has_more))
        if not page.has_more:
            break
        before = page.messages[0].id
    assert pages == [
        (["m6", "m7", "m8", "m9"], True),
        (["m2", "m3", "m4", "m5"], True),
        (["m0", "m1"], False),
    ]
    assert history.get(manager, KEY, limit=2, before_id=ids[2]).has_more is False


def test_get_with_a_limit_of_exactly_the_history_has_no_more(make_manager) -> None:
    manager = make_manager()
    ten_rows(manager)
    assert history.get(manager, KEY, limit=10).has_more is False
    assert history.get(manager, KEY, limit=9).has_more is True
    assert len(history.get(manager, KEY, limit=10_000).messages) == 10


def test_get_before_id_without_limit(make_manager) -> None:
    manager = make_manager()
    ids = ten_rows(manager)
    result = history.get(manager, KEY, before_id=ids[3])
    assert contents(result.messages) == ["m0", "m1", "m2"]
    assert result.has_more is False
    assert history.get(manager, KEY, before_id=ids[0]).messages == ()


def test_an_unknown_conversation_is_empty(make_manager) -> None:
    result = history.get(make_manager(), Key("ws", "never-written"))
    assert (result.messages, result.summary, result.pruned, result.has_more) == (
        (),
        None,
        None,
        False,
    )


def test_get_returns_the_summary(make_manager, clock) -> None:
    manager = make_manager()
    ids = ten_rows(manager)
    history.save_summary(manager, KEY, "the gist", covers_through_id=ids[4])
    assert history.get(manager, KEY).summary == Summary(
        summary="the gist", updated_at=clock.now, covers_through_id=ids[4]
    )
    clock.advance_hours(1)
    history.save_summary(manager, KEY, "newer gist")
    assert history.get_summary(manager, KEY) == Summary(
        summary="newer gist", updated_at=clock.now, covers_through_id=None
    )


# -- keys ------------------------------------------------------------------------------------------


def test_workspaces_and_conversations_are_kept_apart(make_manager) -> None:
    manager = make_manager()
    history.append(manager, Key("w1", "c"), [U("w1 c")])
    history.append(manager, Key("w2", "c"), [U("w2 c")])
    history.append(manager, Key("w1", "d"), [U("w1 d")])
    assert contents(history.get(manager, Key("w1", "c")).messages) == ["w1 c"]
    assert contents(history.get(manager, Key("w2", "c")).messages) == ["w2 c"]
    assert history.clear(manager, Key("w1", "c")) == 1
    assert contents(history.get(manager, Key("w2", "c")).messages) == ["w2 c"]
    assert contents(history.get(manager, Key("w1", "d")).messages) == ["w1 d"]


def test_turn_numbers_are_per_conversation(make_manager) -> None:
    manager = make_manager()
    history.append(manager, Key("w", "a"), [U("a1"), U("a2")])
    stored = history.append(manager, Key("w", "b"), [U("b1")]).messages
    assert stored[0].turn == 1


# -- listConversations -----------------------------------------------------------------------------


def test_list_conversations_newest_activity_first_with_totals(make_manager, clock) -> None:
    manager = make_manager()
    history.append(manager, Key("ws", "old"), [U("a"), A("b")])
    clock.advance_hours(1)
    history.append(manager, Key("ws", "new"), [U("abcd")])
    clock.advance_hours(1)
    history.append(manager, Key("ws", "middle"), [U("x")])
    history.save_summary(manager, Key("ws", "middle"), "summary")  # a client's write: activity too
    clock.advance_hours(1)
    history.append(manager, Key("ws", "new"), [A("later")])
    history.append(manager, Key("other-ws", "elsewhere"), [U("x")])

    listed = list(conversations.list_page(manager, "ws", None, None).conversations)

    assert [c.conversation_id for c in listed] == ["new", "middle", "old"]
    new, middle, old = listed
    assert (new.message_count, new.tokens, new.last_activity, new.has_summary) == (
        2,
        stored_tokens(U("abcd")) + stored_tokens(A("later")),
        T0 + 3 * HOUR,
        False,
    )
    assert middle.has_summary is True
    assert (old.message_count, old.last_activity) == (2, T0)


def test_list_conversations_reflects_retention_and_clear(make_manager) -> None:
    manager = make_manager({"maxMessages": 2})
    history.append(manager, KEY, [U("u1"), A("a1"), U("u2"), A("a2")])
    history.append(manager, Key("ws", "gone"), [U("bye")])
    history.clear(manager, Key("ws", "gone"))
    (only,) = list(conversations.list_page(manager, "ws", None, None).conversations)
    assert (only.conversation_id, only.message_count) == ("conv", 2)
    assert only.tokens == sum(row.tokens for row in history.get(manager, KEY).messages)


def test_a_conversation_with_only_a_summary_is_listed(make_manager, clock) -> None:
    manager = make_manager()
    history.save_summary(manager, Key("ws", "summary-only"), "notes")
    (listed,) = list(conversations.list_page(manager, "ws", None, None).conversations)
    assert (listed.conversation_id, listed.message_count, listed.has_summary) == (
        "summary-only",
        0,
        True,
    )
    assert listed.last_activity == clock.now


def test_list_of_an_unknown_workspace_is_empty(make_manager) -> None:
    assert list(conversations.list_page(make_manager(), "nobody", None, None).conversations) == []


# -- clear -----------------------------------------------------------------------------------------


def test_clear_returns_the_count_and_purges_the_summary(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("a1"), U("u2")])
    history.save_summary(manager, KEY, "summary")

    assert history.clear(manager, KEY) == 3

    result = history.get(manager, KEY)
    assert result.messages == ()
    assert result.summary is None
    assert history.get_summary(manager, KEY) is None
    assert list(conversations.list_page(manager, "ws", None, None).conversations) == []


def test_clear_of_an_unknown_conversation_deletes_nothing(make_manager) -> None:
    assert history.clear(make_manager(), Key("ws", "never")) == 0


def test_a_cleared_conversation_starts_again(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("u1"), A("", "c1")])
    history.clear(manager, KEY)
    with pytest.raises(InvalidParams):
        history.append(manager, KEY, [T("c1")])
    stored = history.append(manager, KEY, [U("fresh")]).messages
    assert contents(history.get(manager, KEY).messages) == ["fresh"]
    assert stored[0].turn >= 1


# -- under: one request's settings, as a value --------------------------------------------------


def test_a_manager_under_other_settings_prunes_by_them_and_leaves_the_manager_as_it_was(
    make_manager,
) -> None:
    manager = make_manager({"maxMessages": 100})
    history.append(manager, KEY, [U(f"u{i}") if i % 2 == 0 else A(f"a{i}") for i in range(10)])
    strict = manager.under(attrs.evolve(manager.settings, max_messages=4))

    assert contents(history.get(strict, KEY).messages) == ["u6", "a7", "u8", "a9"]
    assert manager.settings.max_messages == 100 and strict.settings.max_messages == 4
    history.append(manager, KEY, [U("u10"), A("a11")])  # under 100: nothing more goes
    assert contents(history.get(manager, KEY).messages) == ["u6", "a7", "u8", "a9", "u10", "a11"]
    assert strict.store is manager.store and strict.lock is manager.lock
    assert replies.writer(strict) is replies.writer(manager)  # what ``kept`` holds is shared
