"""Conversation trees in the store and the service (protocol.md "Version 5" → Conversation trees),
on both engines: every variant kept (Regenerate, Edit & resend), siblings on the rows of the
active path, ``switchBranch``'s path (the leaf active most recently, else the newest child),
``getTree``, a subtree truncated, turns deleted (their children follow their parent), fork,
retention on a tree (the active path's rules, the branches below a removed row, the age of a
branch, ``maxInactiveBranches``), search on every branch, another window's ``"branch"``, and the
body ``prepare`` builds for an active path equal to that of the same rows stored as a line."""

from __future__ import annotations

import json

import pytest

from chat_history.errors import ConversationChanged, InvalidParams, ReplyInProgress
from chat_history.model import ExpectedLast, Follow, Key, Message, StoredMessage, ToolCall
from chat_history.policy.search.rank import SearchScope
from chat_history.service import (
    branches,
    conversations,
    edits,
    history,
    replies,
    search,
    workspaces,
)
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions
from chat_history.service.replies import ReplyBegin, ReplyChange
from chat_history.service.watch import ChangeWatch
from chat_history.store.schema import FIGURES
from chat_history.wire.protocol import wire, wire_message

pytestmark = pytest.mark.engines
KEY = Key("ws", "tree")


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


def shown(manager: ChatHistoryManager, key: Key = KEY) -> list[str]:
    return [row.content for row in history.get(manager, key).messages]


def siblings(row: StoredMessage) -> dict[str, object]:
    return wire_message(row)["siblings"]  # type: ignore[no-any-return]


def regenerate(manager: ChatHistoryManager, prompt: int, text: str) -> StoredMessage:
    """Regenerate: ``beginReply`` after the prompt, streamed and ended."""
    row = replies.begin(manager, KEY, ReplyBegin(message=A(""), follow=Follow(prompt)))
    replies.update(manager, KEY, row.id, ReplyChange(content_delta=text))
    ended = replies.end(manager, KEY, row.id, "complete", ReplyChange()).message
    assert ended is not None
    return ended


def test_regenerate_keeps_every_reply_and_siblings_say_where_each_stands(make_manager, clock):
    manager = make_manager()
    q, a = history.append(manager, KEY, [U("question"), A("first reply")]).messages
    clock.now += 1
    second = regenerate(manager, q.id, "second reply")
    assert second.parent_id == q.id
    assert siblings(second) == {"index": 1, "count": 2, "ids": [a.id, second.id]}
    rows = history.get(manager, KEY).messages
    assert [r.content for r in rows] == ["question", "second reply"]
    assert [siblings(r) for r in rows] == [
        {"index": 0, "count": 1, "ids": [q.id]},
        {"index": 1, "count": 2, "ids": [a.id, second.id]},
    ]
    # Nothing was deleted: the first reply is one switch away, where it was.
    back = branches.switch(manager, KEY, a.id)
    assert back.active_leaf_id == a.id
    assert [(r.content, siblings(r)["index"]) for r in back.messages] == [
        ("question", 0),
        ("first reply", 0),
    ]


def test_edit_and_resend_branches_at_the_edited_prompts_parent(make_manager, clock):
    manager = make_manager()
    rows = history.append(manager, KEY, [U("q1"), A("a1"), U("q2"), A("a2")]).messages
    resent = history.append(manager, KEY, [U("q2, edited")], Follow(rows[1].id)).messages[0]
    assert resent.parent_id == rows[1].id and resent.turn == rows[2].turn
    assert siblings(resent) == {"index": 1, "count": 2, "ids": [rows[2].id, resent.id]}
    assert shown(manager) == ["q1", "a1", "q2, edited"]
    history.append(manager, KEY, [A("a2, again")])
    assert shown(manager) == ["q1", "a1", "q2, edited", "a2, again"]
    # A new first row: parentId null. The conversation is the same one: created when it was.
    created = conversations.info(manager, KEY).created_at
    clock.now += 5
    first = history.append(manager, KEY, [U("start over")], Follow(None)).messages[0]
    assert conversations.info(manager, KEY).created_at == created
    assert first.parent_id is None
    assert siblings(first) == {"index": 1, "count": 2, "ids": [rows[0].id, first.id]}
    assert shown(manager) == ["start over"]
    with pytest.raises(InvalidParams) as caught:
        history.append(manager, KEY, [U("x")], Follow(10**9))
    assert caught.value.field == "parent_id"


def test_a_parent_of_another_conversation_is_refused_and_nothing_changes(make_manager):
    manager = make_manager()
    other = history.append(manager, Key("ws", "other"), [U("elsewhere")]).messages[0]
    history.append(manager, KEY, [U("here")])
    with pytest.raises(InvalidParams) as caught:
        history.append(manager, KEY, [U("x")], Follow(other.id))
    assert caught.value.field == "parent_id"
    with pytest.raises(InvalidParams) as caught:
        branches.switch(manager, KEY, other.id)
    assert caught.value.field == "id"
    assert shown(manager) == ["here"]


def test_switch_follows_the_leaf_active_most_recently_below_each_fork(make_manager, clock):
    manager = make_manager()
    q, x, y1 = history.append(manager, KEY, [U("q"), A("x"), U("y1")]).messages
    clock.now += 1
    y2 = history.append(manager, KEY, [U("y2")], Follow(x.id)).messages[0]  # y1 parked
    clock.now += 1
    z = history.append(manager, KEY, [A("z")], Follow(q.id)).messages[0]  # x, y2 parked
    assert shown(manager) == ["q", "z"]
    # From x: y2 was the active leaf after y1.
    assert branches.switch(manager, KEY, x.id).active_leaf_id == y2.id
    # From y1 itself: its path, y1 a leaf.
    assert branches.switch(manager, KEY, y1.id).active_leaf_id == y1.id
    # From x again: now y1 was active most recently.
    clock.now += 1
    branches.switch(manager, KEY, z.id)
    assert branches.switch(manager, KEY, x.id).active_leaf_id == y1.id
    # A row of the active path leaves it as it is: its subtree holds the active leaf.
    assert branches.switch(manager, KEY, q.id).active_leaf_id == y1.id
    assert shown(manager) == ["q", "x", "y1"]


def test_several_switches_within_one_millisecond_keep_their_order(make_manager):
    manager = make_manager()  # the fixed clock does not move
    q, a = history.append(manager, KEY, [U("q"), A("a")]).messages
    b = history.append(manager, KEY, [A("b")], Follow(q.id)).messages[0]
    c = history.append(manager, KEY, [A("c")], Follow(q.id)).messages[0]
    for leaf in (a, c, b, a, b):
        branches.switch(manager, KEY, leaf.id)
    # q's children by recency now: b (active), a, c: truncating b picks a.
    edits.truncate(manager, KEY, b.id)
    assert shown(manager) == ["q", "a"]
    edits.truncate(manager, KEY, a.id)
    assert shown(manager) == ["q", "c"]


def test_switch_answers_a_page_and_checks_what_the_client_saw(make_manager):
    manager = make_manager()
    rows = history.append(manager, KEY, [U("q"), A("a"), U("q2"), A("a2")]).messages
    other = history.append(manager, KEY, [A("b")], Follow(rows[0].id)).messages[0]
    with pytest.raises(ConversationChanged):
        branches.switch(manager, KEY, rows[3].id, expected=ExpectedLast(rows[3].id))
    page = branches.switch(manager, KEY, rows[3].id, expected=ExpectedLast(other.id), limit=2)
    assert [r.content for r in page.messages] == ["q2", "a2"] and page.has_more
    assert page.active_leaf_id == rows[3].id


def test_no_switch_and_no_new_branch_while_a_reply_streams(make_manager):
    manager = make_manager()
    q, a = history.append(manager, KEY, [U("q"), A("a")]).messages
    row = replies.begin(manager, KEY, ReplyBegin())
    with pytest.raises(ReplyInProgress):
        branches.switch(manager, KEY, a.id)
    with pytest.raises(ReplyInProgress):
        history.append(manager, KEY, [U("x")], Follow(q.id))
    replies.end(manager, KEY, row.id, "complete", ReplyChange(content="done"))
    assert shown(manager) == ["q", "a", "done"]


def test_a_discarded_regenerate_shows_the_reply_it_would_have_replaced(make_manager):
    manager = make_manager()
    q, _ = history.append(manager, KEY, [U("q"), A("kept")]).messages
    row = replies.begin(manager, KEY, ReplyBegin(follow=Follow(q.id)))
    assert shown(manager) == ["q", ""]
    replies.end(manager, KEY, row.id, "discard", ReplyChange())
    assert shown(manager) == ["q", "kept"]


def test_get_tree_pages_every_branch_in_id_order(make_manager):
    manager = make_manager()
    long = "🌳" * 50 + "x" * 100
    q, a = history.append(manager, KEY, [U(long), A("a")]).messages
    b = history.append(manager, KEY, [A("b")], Follow(q.id)).messages[0]
    c = history.append(manager, KEY, [U("c")]).messages[0]
    page = branches.tree(manager, KEY)
    assert page.active_leaf_id == c.id and not page.has_more
    assert [(n.id, n.parent_id, n.role, n.children, n.active) for n in page.nodes] == [
        (q.id, None, "user", 2, True),
        (a.id, q.id, "assistant", 0, False),
        (b.id, q.id, "assistant", 1, True),
        (c.id, b.id, "user", 0, True),
    ]
    assert page.nodes[0].preview == long[:80] and len(page.nodes[0].preview) == 80
    first = branches.tree(manager, KEY, limit=2)
    assert [n.id for n in first.nodes] == [q.id, a.id] and first.has_more
    rest = branches.tree(manager, KEY, after_id=a.id, limit=2)
    assert [n.id for n in rest.nodes] == [b.id, c.id] and not rest.has_more
    assert wire(rest.nodes[0]) == {
        "id": b.id,
        "parentId": q.id,
        "role": "assistant",
        "preview": "b",
        "timestamp": b.timestamp,
        "children": 1,
        "active": True,
    }


def test_truncate_deletes_a_subtree_and_the_active_leaf_follows_switch_branchs_pick(
    make_manager, clock
):
    manager = make_manager()
    q, a, q2 = history.append(manager, KEY, [U("q"), A("a"), U("q2")]).messages
    clock.now += 1
    b = history.append(manager, KEY, [A("b")], Follow(q.id)).messages[0]
    history.append(manager, KEY, [U("below b")])
    clock.now += 1
    history.append(manager, KEY, [A("c")], Follow(q.id))
    # An inactive subtree: gone, the active path as it was.
    result = edits.truncate(manager, KEY, b.id)
    assert result.deleted_messages == 2
    assert shown(manager) == ["q", "c"]
    assert [n.id for n in branches.tree(manager, KEY).nodes if n.parent_id == q.id] == [
        a.id,
        branches.tree(manager, KEY).active_leaf_id,
    ]
    # The active path's end: its rows and the branches below them go; the parent's other
    # child comes on (a's path, with q2).
    leaf = history.get(manager, KEY).messages[-1]
    result = edits.truncate(manager, KEY, leaf.id)
    assert result.deleted_messages == 1
    assert shown(manager) == ["q", "a", "q2"]
    # The first row: the whole tree goes.
    assert edits.truncate(manager, KEY, q.id).deleted_messages == 3
    assert shown(manager) == [] and branches.tree(manager, KEY).nodes == ()
    assert q2.id  # (read above)


def test_delete_turns_moves_their_children_to_their_parent(make_manager):
    manager = make_manager()
    q1, a1, q2, a2, q3 = history.append(
        manager, KEY, [U("q1"), A("a1"), U("q2"), A("a2"), U("q3")]
    ).messages
    b = history.append(manager, KEY, [A("b")], Follow(q2.id)).messages[0]  # a2, q3 parked
    branches.switch(manager, KEY, q3.id)
    assert shown(manager) == ["q1", "a1", "q2", "a2", "q3"]
    edits.delete_turns(manager, KEY, [q2.turn])  # q2 and a2 go
    rows = history.get(manager, KEY).messages
    assert [(r.content, r.parent_id) for r in rows] == [("q1", None), ("a1", q1.id), ("q3", a1.id)]
    # b followed q2: it follows a1 now, beside q3.
    assert siblings(rows[-1]) == {"index": 0, "count": 2, "ids": [q3.id, b.id]}
    assert [(n.id, n.parent_id) for n in branches.tree(manager, KEY).nodes if n.id == b.id] == [
        (b.id, a1.id)
    ]
    # Every turn deleted: the branch left comes on.
    edits.delete_turns(manager, KEY, [q1.turn, q3.turn])
    assert shown(manager) == ["b"]
    assert a2.id  # (parked above)


def test_fork_copies_the_active_path_never_the_siblings(make_manager):
    manager = make_manager()
    q, a = history.append(manager, KEY, [U("q"), A("a")]).messages
    history.append(manager, KEY, [A("b"), U("q2")], Follow(q.id))
    target = Key("ws", "copy")
    info = conversations.fork(manager, KEY, target, None)
    assert info.message_count == 3
    rows = history.get(manager, target).messages
    assert [r.content for r in rows] == ["q", "b", "q2"]
    assert [r.parent_id for r in rows] == [None, rows[0].id, rows[1].id]
    assert all(siblings(r)["count"] == 1 for r in rows)
    assert branches.tree(manager, target).nodes[-1].id == rows[-1].id
    assert len(branches.tree(manager, target).nodes) == 3
    assert a.id  # (not copied)


def test_fork_through_a_row_of_another_branch_copies_its_path_and_leaves_the_source(
    make_manager,
):
    manager = make_manager()
    q, a, q2 = history.append(manager, KEY, [U("q"), A("a"), U("q2")]).messages
    history.append(manager, KEY, [A("b"), U("below b")], Follow(q.id))
    before = history.get(manager, KEY).messages
    tree_before = branches.tree(manager, KEY)
    target = Key("ws", "from a")
    info = conversations.fork(manager, KEY, target, a.id)
    assert info.message_count == 2
    assert [r.content for r in history.get(manager, target).messages] == ["q", "a"]
    assert history.get(manager, KEY).messages == before
    assert branches.tree(manager, KEY) == tree_before
    # The leaf active most recently is still q2: the copy stamped nothing.
    edits.truncate(manager, KEY, before[1].id)
    assert shown(manager) == ["q", "a", "q2"]
    assert q2.id  # (shown above)


def test_prepare_leaves_out_a_summary_of_another_branchs_rows(make_manager):
    manager = make_manager()
    q, a, q2, a2 = history.append(manager, KEY, [U("q"), A("a"), U("q2"), A("a2")]).messages
    history.save_summary(manager, KEY, "SUMMARY of q2 and a2", covers_through_id=a2.id)
    history.append(manager, KEY, [U("q3")])

    def sent() -> str:
        return json.dumps(
            wire(history.prepare(manager, KEY, PrepareOptions(provider="openai")).body)
        )

    assert "SUMMARY" in sent()
    history.append(manager, KEY, [U("instead of q2")], Follow(a.id))  # q2, a2 parked
    assert "SUMMARY" not in sent() and "instead of q2" in sent()
    branches.switch(manager, KEY, q2.id)
    assert "SUMMARY" in sent()
    assert q.id  # (the first row of both paths)


def test_every_change_of_key_carries_the_other_branches(make_manager):
    manager = make_manager()
    q, a = history.append(manager, KEY, [U("q"), A("a")]).messages
    b = history.append(manager, KEY, [A("b")], Follow(q.id)).messages[0]
    history.append(manager, Key("ws2", "tree"), [U("taken")])
    history.append(manager, Key("ws2", "other"), [U("o")])
    # Into a workspace where the id is taken: the conversation moves under a new id, its other
    # branch with it.
    with manager.lock:
        line = manager.write((), lambda tx: workspaces._take(tx, "ws", "ws2", "a test", 1))
    assert "is now" in line
    moved = Key("ws2", "tree (moved)")
    assert shown(manager, moved) == ["q", "b"]
    assert branches.switch(manager, moved, a.id).active_leaf_id == a.id
    assert shown(manager, moved) == ["q", "a"]
    assert shown(manager, Key("ws2", "tree")) == ["taken"]
    assert branches.tree(manager, Key("ws2", "tree")).nodes[0].preview == "taken"
    # A plain move: every branch goes with its conversation; nothing is left behind.
    assert workspaces.move(manager, "ws2", "ws3") == 3
    assert [n.id for n in branches.tree(manager, Key("ws3", "tree (moved)")).nodes] == [
        q.id,
        a.id,
        b.id,
    ]
    assert branches.tree(manager, Key("ws2", "tree (moved)")).nodes == ()
    listed = conversations.list_page(manager, None, None, None).conversations
    assert sorted((i.workspace, i.conversation_id) for i in listed) == [
        ("ws3", "other"),
        ("ws3", "tree"),
        ("ws3", "tree (moved)"),
    ]
    with manager.store.read() as reading:
        assert reading.stats().conversations == 3


def test_clear_deletes_every_branch(make_manager):
    manager = make_manager()
    q = history.append(manager, KEY, [U("q"), A("a")]).messages[0]
    history.append(manager, KEY, [A("b")], Follow(q.id))
    assert history.clear(manager, KEY) == 3
    assert branches.tree(manager, KEY).nodes == ()
    assert conversations.list_page(manager, None, None, None).conversations == ()
    with manager.store.read() as reading:
        assert reading.stats().messages == 0
    # The id is free again: a new conversation under it has no branches of the old one.
    again = history.append(manager, KEY, [U("again")]).messages[0]
    assert siblings(again)["count"] == 1


def test_search_finds_every_branch_retention_keeps_and_says_which_is_shown(make_manager):
    manager = make_manager()
    q, a = history.append(manager, KEY, [U("question"), A("zebra first")]).messages
    b = history.append(manager, KEY, [A("zebra second")], Follow(q.id)).messages[0]
    found = search.search(manager, SearchScope("ws", "tree", ("assistant",)), "zebra", 10)
    assert sorted((h.id, h.conversation, h.on_active_path) for h in found.hits) == [
        (a.id, "tree", False),
        (b.id, "tree", True),
    ]
    everywhere = search.search(manager, SearchScope(None, None, ("assistant",)), "zebra", 10)
    assert {h.conversation for h in everywhere.hits} == {"tree"}
    edits.truncate(manager, KEY, a.id)
    found = search.search(manager, SearchScope("ws", None, ("assistant",)), "zebra", 10)
    assert [(h.id, h.on_active_path) for h in found.hits] == [(b.id, True)]


def test_max_inactive_branches_deletes_the_least_recently_active_first(make_manager, clock):
    manager = make_manager({"maxInactiveBranches": 2})
    q = history.append(manager, KEY, [U("q")]).messages[0]
    made = []
    for text in ("r1", "r2", "r3"):
        clock.now += 1
        made.append(history.append(manager, KEY, [A(text)], Follow(q.id)))
    assert all(m.pruned is None for m in made)
    clock.now += 1
    branches.switch(manager, KEY, made[0].messages[0].id)  # r1 active; r3 was just active
    clock.now += 1
    result = history.append(manager, KEY, [A("r4")], Follow(q.id))
    # Inactive: r1 (just now), r3, r2 (least recently active): r2 goes.
    assert result.pruned is not None and result.pruned.dropped_branches == 1
    assert result.pruned.dropped_messages == 0 and result.pruned.reasons == ()
    assert sorted(n.preview for n in branches.tree(manager, KEY).nodes) == ["q", "r1", "r3", "r4"]
    none_kept = make_manager({"maxInactiveBranches": 0})
    result = history.append(none_kept, KEY, [A("r5")], Follow(q.id))
    assert result.pruned is not None and result.pruned.dropped_branches == 3  # r1, r3, r4
    assert [n.preview for n in branches.tree(none_kept, KEY).nodes] == ["q", "r5"]


def test_an_inactive_branch_whose_newest_row_is_old_goes_whole(make_manager, clock):
    manager = make_manager({"maxAgeHours": 10})
    q = history.append(manager, KEY, [U("q"), A("old")]).messages[0]
    clock.advance_hours(5)
    history.append(manager, KEY, [A("new"), U("more")], Follow(q.id))
    clock.advance_hours(3)
    history.append(manager, KEY, [A("newer")], Follow(q.id))  # new, more: newest 8 h ago
    # q itself is 8 hours old: the active path keeps it. "old" is older than 10 hours at 10.5.
    clock.advance_hours(2.5)
    page = history.get(manager, KEY)
    assert page.pruned is not None and page.pruned.dropped_branches == 1
    assert [n.preview for n in branches.tree(manager, KEY).nodes] == ["q", "new", "more", "newer"]
    # 16.5 hours after q: "more" is 11.5 hours old, its branch goes; q's turn ends with "newer",
    # 8.5 hours old, so the active path keeps both.
    clock.advance_hours(6)
    assert shown(manager) == ["q", "newer"]
    assert [n.preview for n in branches.tree(manager, KEY).nodes] == ["q", "newer"]
    clock.advance_hours(2)  # now the whole turn is older than 10 hours
    assert shown(manager) == [] and branches.tree(manager, KEY).nodes == ()


def test_a_row_retention_removes_takes_the_branches_below_it(make_manager, clock):
    manager = make_manager({"maxMessages": 4})
    q1, a1 = history.append(manager, KEY, [U("q1"), A("a1")]).messages
    history.append(manager, KEY, [A("a1, again")], Follow(q1.id))  # a1 parked below q1
    q_other = history.append(manager, KEY, [U("q2")], Follow(None)).messages[0]  # a first row
    branches.switch(manager, KEY, a1.id)
    history.append(manager, KEY, [U("q2"), A("a2")])
    result = history.append(manager, KEY, [U("q3"), A("a3")])  # 6 rows: turn 1 goes
    assert result.pruned is not None and result.pruned.dropped_messages == 2
    assert result.pruned.dropped_branches == 0  # the branch below q1 went with it
    rows = history.get(manager, KEY).messages
    assert [r.content for r in rows] == ["q2", "a2", "q3", "a3"]
    assert rows[0].parent_id is None  # a first row now, beside the other first row
    assert siblings(rows[0]) == {"index": 1, "count": 2, "ids": [q_other.id, rows[0].id]}
    assert sorted(n.preview for n in branches.tree(manager, KEY).nodes) == [
        "a2",
        "a3",
        "q2",
        "q2",
        "q3",
    ]


def test_another_window_hears_of_a_switch_as_branch(make_manager):
    mine, other = make_manager(), make_manager()
    q, a = history.append(mine, KEY, [U("q"), A("a")]).messages
    watch = ChangeWatch(other.store, lambda: "ws")
    watch.poll()
    history.append(mine, KEY, [A("b")], Follow(q.id))
    assert [(c.conversation, c.reason) for c in watch.poll()] == [("tree", "branch")]
    branches.switch(mine, KEY, a.id)
    changes = watch.poll()
    assert [(c.conversation, c.reason, c.last_id) for c in changes] == [("tree", "branch", a.id)]
    history.append(mine, KEY, [U("next")])
    assert [c.reason for c in watch.poll()] == ["append"]


def _figures(manager: ChatHistoryManager, key: Key) -> list[tuple[int, ...]]:
    """The turn figures recorded for the conversation (what ``prepare`` counts for the turns it
    does not read): the active path's must be a line's."""
    with manager.store.read() as reading:
        return [
            tuple(row)
            for row in reading.connection.execute(
                f"SELECT turn, {', '.join(FIGURES)}, {', '.join('earlier_' + f for f in FIGURES)} "
                "FROM turn_figures WHERE workspace = ? AND conversation = ? ORDER BY turn",
                (key.workspace, key.conversation),
            )
        ]


def _bodies(manager: ChatHistoryManager, key: Key) -> str:
    found = {
        kind: wire(history.format(manager, key, kind).body) for kind in ("openai", "anthropic")
    }
    for turns in (0, 1, 50):  # the tool context kept: every turn's figures count
        options = PrepareOptions(provider="openai", keep_tool_context_turns=turns)
        found[f"prepare {turns}"] = wire(history.prepare(manager, key, options).body)
    return json.dumps(found, sort_keys=True)


def _tool_turn(n: int) -> list[Message]:
    call = ToolCall(id=f"call_{n}", name="read", arguments={"n": n})
    return [
        U(f"question {n}"),
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content=f"result {n} " * 20, tool_call_id=call.id, name="read"),
        A(f"answer {n}"),
    ]


def test_the_body_of_an_active_path_is_that_of_the_same_rows_stored_as_a_line(make_manager, clock):
    manager = make_manager({"context": {"maxHistoryTurns": 3}})
    rows: list[StoredMessage] = []
    for n in range(4):
        clock.now += 1
        rows += history.append(manager, KEY, _tool_turn(n)).messages
    clock.now += 1
    history.append(manager, KEY, _tool_turn(10) + _tool_turn(11), Follow(rows[7].id))
    clock.now += 1
    regenerate(manager, rows[-4].id, "another answer")
    for n, target in enumerate((rows[-1].id, rows[3].id, rows[-1].id)):
        clock.now += 1
        branches.switch(manager, KEY, target)
        line = Key("ws", f"line {n}")
        for row in history.get(manager, KEY).messages:
            history.append(manager, line, [_message_of(row)])
        assert _bodies(manager, KEY) == _bodies(manager, line)
        assert _figures(manager, KEY) == _figures(manager, line) != []
    # ... and where the branch with the regenerated answer is shown.
    branches.switch(manager, KEY, rows[8].id)
    line = Key("ws", "line, regenerated")
    for row in history.get(manager, KEY).messages:
        history.append(manager, line, [_message_of(row)])
    assert _bodies(manager, KEY) == _bodies(manager, line)


def _message_of(row: StoredMessage) -> Message:
    return Message(
        role=row.role,
        content=row.content,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        timestamp=row.timestamp,
    )
