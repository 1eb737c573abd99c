"""Conversation trees over the real server process (protocol.md "Version 5" → Conversation trees),
on both engines: Regenerate (``beginReply`` with ``parentId``) and Edit & resend (``append`` with
``parentId``) keep every variant, each row of the active path carries ``parentId`` and
``siblings``, ``switchBranch`` and ``getTree`` answer as the spec writes them, the refusals name
their field (-32602) or say a reply streams (1004), ``expectedLastId`` names the active leaf,
search says which hits are on the active path, and another window hears of a switch as
``"branch"``. The server still advertises protocol version 4."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.test_windows import CHANGED, WORKSPACE, windows
from tests.e2e.wire import Wire

__all__ = ["windows"]  # the fixture, imported for pytest
pytestmark = pytest.mark.engines


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def append(wire: Wire, *messages: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    result = wire.call(
        "chatHistory/append", {"conversationId": "c", "messages": list(messages), **extra}
    )
    found: list[dict[str, Any]] = result["messages"]
    return found


def shown(wire: Wire) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wire.call("chatHistory/get", {"conversationId": "c"})["messages"]
    return found


def one(row_id: int) -> dict[str, Any]:
    return {"index": 0, "count": 1, "ids": [row_id]}


def test_regenerate_and_edit_and_resend_keep_every_variant(windows: tuple[Wire, Wire]) -> None:
    wire, _ = windows
    q, a = append(wire, user("question"), assistant("first"))
    assert (q["parentId"], q["siblings"]) == (None, one(q["id"]))
    assert (a["parentId"], a["siblings"]) == (q["id"], one(a["id"]))
    # Regenerate: a reply after the prompt.
    begun = wire.call(
        "chatHistory/beginReply",
        {"conversationId": "c", "parentId": q["id"], "message": {"content": "sec"}},
    )
    assert begun["parentId"] == q["id"]
    assert begun["siblings"] == {"index": 1, "count": 2, "ids": [a["id"], begun["id"]]}
    ended = wire.call(
        "chatHistory/endReply",
        {"conversationId": "c", "id": begun["id"], "status": "complete", "content": "second"},
    )
    assert ended["message"]["siblings"]["ids"] == [a["id"], begun["id"]]
    assert [r["content"] for r in shown(wire)] == ["question", "second"]
    # Edit & resend: the new prompt after the edited prompt's parent (a new first row here).
    resent = append(wire, user("question, edited"), parentId=None)[0]
    assert resent["siblings"] == {"index": 1, "count": 2, "ids": [q["id"], resent["id"]]}
    assert [r["content"] for r in shown(wire)] == ["question, edited"]
    # Every variant is in the tree.
    tree = wire.call("chatHistory/getTree", {"conversationId": "c"})
    assert tree == {
        "nodes": [
            {
                "id": q["id"],
                "parentId": None,
                "role": "user",
                "preview": "question",
                "timestamp": q["timestamp"],
                "children": 2,
                "active": False,
            },
            {
                "id": a["id"],
                "parentId": q["id"],
                "role": "assistant",
                "preview": "first",
                "timestamp": a["timestamp"],
                "children": 0,
                "active": False,
            },
            {
                "id": begun["id"],
                "parentId": q["id"],
                "role": "assistant",
                "preview": "second",
                "timestamp": begun["timestamp"],
                "children": 0,
                "active": False,
            },
            {
                "id": resent["id"],
                "parentId": None,
                "role": "user",
                "preview": "question, edited",
                "timestamp": resent["timestamp"],
                "children": 0,
                "active": True,
            },
        ],
        "activeLeafId": resent["id"],
        "hasMore": False,
    }
    # Back to the first question: the reply active most recently (the second) comes with it.
    switched = wire.call(
        "chatHistory/switchBranch",
        {"conversationId": "c", "id": q["id"], "expectedLastId": resent["id"]},
    )
    assert switched["activeLeafId"] == begun["id"]
    assert [r["content"] for r in switched["messages"]] == ["question", "second"]
    assert switched["messages"][0]["siblings"] == {
        "index": 0,
        "count": 2,
        "ids": [q["id"], resent["id"]],
    }
    paged = wire.call(
        "chatHistory/switchBranch", {"conversationId": "c", "id": a["id"], "limit": 1}
    )
    assert [r["content"] for r in paged["messages"]] == ["first"] and paged["hasMore"]


def test_refusals_name_their_field_or_say_a_reply_streams(windows: tuple[Wire, Wire]) -> None:
    wire, _ = windows
    q, a = append(wire, user("question"), assistant("answer"))
    other = wire.call(
        "chatHistory/append", {"conversationId": "other", "messages": [user("elsewhere")]}
    )["messages"][0]
    for method, params, field in (
        ("chatHistory/switchBranch", {"id": other["id"]}, "id"),
        ("chatHistory/switchBranch", {"id": -1}, "id"),
        ("chatHistory/append", {"messages": [user("x")], "parentId": other["id"]}, "parentId"),
        ("chatHistory/append", {"messages": [user("x")], "parentId": "1"}, "parentId"),
        ("chatHistory/getTree", {"limit": 0}, "limit"),
        ("chatHistory/getTree", {"limit": 10_001}, "limit"),
        ("chatHistory/get", {"conversationId": "c\x00branches"}, "conversationId"),
    ):
        error = wire.error(method, {"conversationId": "c", **params})
        assert (error["code"], error["data"]["field"]) == (-32602, field), (method, error)
    stale = wire.error(
        "chatHistory/switchBranch",
        {"conversationId": "c", "id": a["id"], "expectedLastId": q["id"]},
    )
    assert (stale["code"], stale["data"]["lastId"]) == (1003, a["id"])
    begun = wire.call("chatHistory/beginReply", {"conversationId": "c"})
    streaming = wire.error("chatHistory/switchBranch", {"conversationId": "c", "id": a["id"]})
    assert (streaming["code"], streaming["data"]["id"]) == (1004, begun["id"])
    error = wire.error(
        "chatHistory/append",
        {"conversationId": "c", "messages": [user("x")], "parentId": q["id"]},
    )
    assert error["code"] == 1004
    assert [r["id"] for r in shown(wire)] == [q["id"], a["id"], begun["id"]]


def test_truncate_and_search_over_branches(windows: tuple[Wire, Wire]) -> None:
    wire, _ = windows
    q, a = append(wire, user("question"), assistant("zebra one"))
    b = append(wire, assistant("zebra two"), parentId=q["id"])[0]
    found = wire.call("chatHistory/search", {"query": "zebra", "conversationId": "c"})
    assert sorted((h["id"], h["onActivePath"]) for h in found["results"]) == [
        (a["id"], False),
        (b["id"], True),
    ]
    truncated = wire.call(
        "chatHistory/truncate",
        {"conversationId": "c", "fromId": b["id"], "expectedLastId": b["id"]},
    )
    assert truncated["deletedMessages"] == 1
    assert [r["content"] for r in shown(wire)] == ["question", "zebra one"]


def test_another_window_hears_of_a_switch_as_branch(windows: tuple[Wire, Wire]) -> None:
    first, second = windows
    q, a = append(first, user("question"), assistant("one"))
    b = append(first, assistant("two"), parentId=q["id"])[0]
    assert shown(second)[-1]["id"] == b["id"]
    second.drain(1.0)
    before = len(second.messages_of(CHANGED))
    first.call("chatHistory/switchBranch", {"conversationId": "c", "id": a["id"]})
    count = 0

    def next_change(message: dict[str, Any]) -> bool:
        nonlocal count
        if message.get("method") != CHANGED:
            return False
        count += 1
        return count > before

    change = second.wait_for(next_change, 5.0)["params"]
    assert change == {
        "workspace": WORKSPACE,
        "conversationId": "c",
        "lastId": a["id"],
        "reason": "branch",
    }


def test_the_server_advertises_version_5(tmp_path: Path, databases: Databases | None):
    wire = Wire(tmp_path)
    try:
        options: dict[str, Any] = {"workspace": WORKSPACE}
        if databases is not None:
            options["database"] = databases.url(tmp_path)
        result = wire.initialize(configuration=False, options=options)
        assert result["capabilities"]["experimental"]["chatHistory"]["protocolVersion"] == 5
    finally:
        wire.close()
