"""Version 2 conversations and edits over the real server process (protocol.md "Version 2" →
Conversations; Edit, rewind, branch; semantics.md "Rewinding and turn numbers"): titles and
metadata, the paged listing, clear, truncate, deleteTurns, editMessage, fork, deleteSummary, the
field each refusal names, and two processes on one database."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException
from tests.conftest import Databases
from tests.e2e.conftest import Session, StartSession

pytestmark = pytest.mark.engines

INFO_FIELDS = {
    "conversationId",
    "workspace",
    "title",
    "titleSource",
    "createdAt",
    "lastActivity",
    "messageCount",
    "tokens",
    "hasSummary",
    "metadata",
}


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: str | None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def call(call_id: str, name: str = "read_file") -> dict[str, Any]:
    return assistant(None, toolCalls=[{"id": call_id, "name": name, "arguments": {"p": 1}}])


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "toolCallId": call_id, "name": "read_file", "content": text}


async def refused(session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(JsonRpcException) as caught:
        await session.request(method, params)
    assert caught.value.code == -32602, caught.value
    data = caught.value.data
    assert isinstance(data, dict)
    return data


async def rows(session: Session, conversation: str, **extra: Any) -> list[dict[str, Any]]:
    got = await session.request("chatHistory/get", {"conversationId": conversation, **extra})
    return list(got["messages"])


async def listing(session: Session, **params: Any) -> dict[str, Any]:
    return dict(await session.request("chatHistory/listConversations", params))


async def three_turns(session: Session, conversation: str = "c") -> list[dict[str, Any]]:
    """system, turn 1 (prompt, tool call, result, reply), turn 2 (prompt, reply), turn 3."""
    appended = await session.append(
        conversation,
        {"role": "system", "content": "be terse"},
        user("first question"),
        call("k1"),
        result("k1", "file text"),
        assistant("first answer"),
        user("second question"),
        assistant("second answer"),
        user("third question"),
        assistant("third answer"),
    )
    return list(appended["messages"])


# -- conversations: titles, metadata, listing -----------------------------------------------------


async def test_listing_gives_every_field_and_the_automatic_title(start_session: StartSession):
    session = await start_session()
    await session.append(
        "c",
        {"role": "system", "content": "sys"},
        user("   "),
        user("[Tool results] not a prompt"),
        user("  Fix   the\n\tlogin  bug  "),
    )
    (info,) = (await listing(session))["conversations"]
    assert set(info) == INFO_FIELDS
    assert info["conversationId"] == "c" and info["workspace"] == "default"
    assert info["title"] == "Fix the login bug" and info["titleSource"] == "auto"
    assert info["metadata"] == {} and info["hasSummary"] is False and info["messageCount"] == 4
    assert isinstance(info["createdAt"], int) and info["lastActivity"] >= info["createdAt"]

    await session.append("long", user("x" * 81))
    long = (await listing(session))["conversations"][0]
    assert long["title"] == "x" * 79 + "…" and len(long["title"]) == 80

    await session.append("untitled", assistant("no user yet"))
    untitled = (await listing(session))["conversations"][0]
    assert untitled["conversationId"] == "untitled"
    assert untitled["title"] is None and untitled["titleSource"] is None


async def test_update_conversation_sets_and_restores_titles_and_replaces_metadata(
    start_session: StartSession,
):
    session = await start_session()
    await session.append("c", user("the automatic title"))
    named = await session.request(
        "chatHistory/updateConversation",
        {"conversationId": "c", "title": "My title", "metadata": {"pinned": True, "tag": "a"}},
    )
    assert set(named) == INFO_FIELDS
    assert named["title"] == "My title" and named["titleSource"] == "user"
    assert named["metadata"] == {"pinned": True, "tag": "a"}
    # metadata replaces; a request without title leaves the title alone
    replaced = await session.request(
        "chatHistory/updateConversation", {"conversationId": "c", "metadata": {"tag": "b"}}
    )
    assert replaced["metadata"] == {"tag": "b"} and replaced["title"] == "My title"
    restored = await session.request(
        "chatHistory/updateConversation", {"conversationId": "c", "title": None}
    )
    assert restored["title"] == "the automatic title" and restored["titleSource"] == "auto"
    assert (await listing(session))["conversations"] == [restored]


async def test_a_title_or_metadata_creates_the_conversation_and_clear_removes_it(
    start_session: StartSession,
):
    session = await start_session()
    nothing = await session.request(
        "chatHistory/updateConversation", {"conversationId": "empty", "metadata": {}}
    )
    assert nothing["title"] is None and nothing["createdAt"] is None
    assert nothing["lastActivity"] is None and nothing["messageCount"] == 0
    assert (await listing(session))["conversations"] == []

    created = await session.request(
        "chatHistory/updateConversation", {"conversationId": "draft", "title": "Plan"}
    )
    assert created["titleSource"] == "user" and isinstance(created["createdAt"], int)
    assert created["lastActivity"] == created["createdAt"]
    assert [c["conversationId"] for c in (await listing(session))["conversations"]] == ["draft"]

    tagged = await session.request(
        "chatHistory/updateConversation", {"conversationId": "tagged", "metadata": {"k": 1}}
    )
    assert tagged["metadata"] == {"k": 1} and tagged["title"] is None

    await session.append("draft", user("hello"))
    await session.request("chatHistory/saveSummary", {"conversationId": "draft", "summary": "s"})
    cleared = await session.request("chatHistory/clear", {"conversationId": "draft"})
    assert cleared == {"deletedMessages": 1}
    assert [c["conversationId"] for c in (await listing(session))["conversations"]] == ["tagged"]
    again = await session.request(
        "chatHistory/updateConversation", {"conversationId": "draft", "metadata": {}}
    )
    assert again["title"] is None and again["metadata"] == {} and again["createdAt"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"title": ""}, "title"),
        ({"title": "   "}, "title"),
        ({"title": "t" * 201}, "title"),
        ({"title": 7}, "title"),
        ({"metadata": [1]}, "metadata"),
        ({"metadata": "x"}, "metadata"),
    ],
)
async def test_update_conversation_refusals_name_the_field(
    start_session: StartSession, params: dict[str, Any], field: str
):
    session = await start_session()
    await session.append("c", user("kept"))
    data = await refused(
        session, "chatHistory/updateConversation", {"conversationId": "c", **params}
    )
    assert data == {"field": field}
    (info,) = (await listing(session))["conversations"]
    assert info["title"] == "kept" and info["metadata"] == {}


async def test_a_title_of_200_characters_is_accepted(start_session: StartSession):
    session = await start_session()
    title = "é" * 200
    info = await session.request(
        "chatHistory/updateConversation", {"conversationId": "c", "title": title}
    )
    assert info["title"] == title


async def test_listing_pages_with_cursors_newest_activity_first(start_session: StartSession):
    session = await start_session()
    for name in ("a", "b", "c", "d", "e"):
        await session.append(name, user(f"prompt {name}"))
        await asyncio.sleep(0.003)  # distinct activity times (ties would order by id)
    everything = await listing(session)
    assert [c["conversationId"] for c in everything["conversations"]] == ["e", "d", "c", "b", "a"]
    assert everything["nextCursor"] is None

    first = await listing(session, limit=2)
    assert [c["conversationId"] for c in first["conversations"]] == ["e", "d"]
    assert isinstance(first["nextCursor"], str)
    # a write between pages moves "a" to the front; the pages after the cursor don't repeat it
    await session.append("a", user("touched"))
    second = await listing(session, limit=2, cursor=first["nextCursor"])
    assert [c["conversationId"] for c in second["conversations"]] == ["c", "b"]
    assert second["nextCursor"] is None  # "a" moved ahead of the cursor: nothing is left
    exact = await listing(session, limit=5)
    assert len(exact["conversations"]) == 5


async def test_listing_all_workspaces(start_session: StartSession):
    session = await start_session()
    await session.append("here", user("mine"))
    await asyncio.sleep(0.003)
    await session.append("there", user("theirs"), workspace="file:///other")
    assert [c["conversationId"] for c in (await listing(session))["conversations"]] == ["here"]
    every = (await listing(session, allWorkspaces=True))["conversations"]
    assert {(c["workspace"], c["conversationId"]) for c in every} == {
        ("default", "here"),
        ("file:///other", "there"),
    }
    assert [c["conversationId"] for c in every] == ["there", "here"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "c1.AAAA"}, "cursor"),
        ({"allWorkspaces": "yes"}, "allWorkspaces"),
    ],
)
async def test_listing_refusals_name_the_field(
    start_session: StartSession, params: dict[str, Any], field: str
):
    session = await start_session()
    data = await refused(session, "chatHistory/listConversations", params)
    assert data == {"field": field}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _signed(payload: bytes, key: bytes) -> str:
    """A cursor over ``payload`` with a valid tag: what a client holding the key could forge."""
    return f"c2.{_b64(payload)}.{_b64(hmac.new(key, payload, hashlib.sha256).digest()[:16])}"


def _cursor_key(storage: Path, databases: Databases | None = None) -> bytes:
    """The database's cursor key, read from the SQLite file or the test's PostgreSQL database."""
    if databases is not None:
        import psycopg

        with psycopg.connect(databases.url(storage)) as pg:
            row = pg.execute("SELECT secret FROM server_keys WHERE name = 'cursor'").fetchone()
        assert row is not None
        return bytes(row[0])
    with contextlib.closing(sqlite3.connect(storage / "chat-history.sqlite3")) as db:
        found = db.execute("SELECT secret FROM server_keys WHERE name = 'cursor'").fetchone()
    return bytes(found[0])


async def test_a_forged_cursor_is_refused_naming_the_field(
    start_session: StartSession, tmp_path: Path, databases: Databases | None
):
    session = await start_session()
    for name in ("a", "b", "c"):
        await session.append(name, user(f"prompt {name}"))
        await asyncio.sleep(0.003)
    handed_out = (await listing(session, limit=1))["nextCursor"]
    assert [
        c["conversationId"] for c in (await listing(session, cursor=handed_out))["conversations"]
    ] == ["b", "a"]
    body, _, tag = handed_out[3:].partition(".")
    unsigned = [
        # a position the server never listed, in the old unsigned spelling and in the new one
        "c1." + _b64(b'[1234,"never-listed","file:///ws"]'),
        "c2." + _b64(b'[1234,"never-listed","file:///ws"]') + "." + tag,
        "c2." + _b64(b'[1234,"never-listed","file:///ws"]'),
        # an id holding a lone surrogate, an activity past SQLite's integers (were -32603)
        "c1." + _b64(b'[1,"\\ud800","default"]'),
        "c1." + _b64(b'[9223372036854775808,"a","default"]'),
        "c2." + _b64(b'[9223372036854775808,"a","default"]') + "." + tag,
        # the handed-out cursor altered: its tag, its body, padding
        f"c2.{body}.{tag[:-2]}AA",
        f"c2.{body}A.{tag}",
        f"c2.{body}.{tag}=",
        "c2." + "A" * 100_000,
    ]
    for cursor in unsigned:
        data = await refused(session, "chatHistory/listConversations", {"cursor": cursor})
        assert data == {"field": "cursor"}, cursor
    # Even with the database's key (a file leaked), a position no query can take is refused.
    key = _cursor_key(session.storage, databases)
    signed = [
        _signed(b'[1,"\\ud800","default"]', key),
        _signed(b'[9223372036854775808,"a","default"]', key),
        _signed(b'[-1,"a","default"]', key),
        _signed(b'[1,"a",""]', key),
        _signed(b'[1,"a"]', key),
    ]
    for cursor in signed:
        data = await refused(session, "chatHistory/listConversations", {"cursor": cursor})
        assert data == {"field": "cursor"}, cursor
    # another process on the database accepts the cursor; one on another database refuses it
    other = await start_session(storage=session.storage)
    assert len((await listing(other, cursor=handed_out))["conversations"]) == 2
    elsewhere = await start_session(storage=tmp_path / "elsewhere")
    await elsewhere.append("b", user("prompt b"))
    data = await refused(elsewhere, "chatHistory/listConversations", {"cursor": handed_out})
    assert data == {"field": "cursor"}


async def test_an_update_that_changes_nothing_is_not_activity(start_session: StartSession):
    session = await start_session()
    update = "chatHistory/updateConversation"
    await session.request(update, {"conversationId": "a", "title": "A", "metadata": {"k": [1]}})
    await session.append("u", user("untitled"))
    await asyncio.sleep(0.003)
    await session.append("b", user("newer"))
    before = (await listing(session))["conversations"]
    assert [c["conversationId"] for c in before] == ["b", "u", "a"]
    await asyncio.sleep(0.003)
    unchanged = [
        ("a", {"title": "A"}),
        ("a", {"metadata": {"k": [1]}}),
        ("a", {"title": "A", "metadata": {"k": [1]}}),
        ("a", {}),
        ("u", {"title": None}),  # already the automatic title
        ("u", {"metadata": {}}),  # already empty
    ]
    for conversation, change in unchanged:
        info = await session.request(update, {"conversationId": conversation, **change})
        assert info["lastActivity"] == next(
            c["lastActivity"] for c in before if c["conversationId"] == conversation
        ), change
    assert (await listing(session))["conversations"] == before
    # a real change is activity
    await session.request(update, {"conversationId": "a", "metadata": {"k": [2]}})
    after = [c["conversationId"] for c in (await listing(session))["conversations"]]
    assert after == ["a", "b", "u"]


async def test_last_activity_follows_client_writes(start_session: StartSession):
    session = await start_session()
    appended = await three_turns(session, "a")
    await session.append("b", user("later"))
    order = [c["conversationId"] for c in (await listing(session))["conversations"]]
    assert order == ["b", "a"]
    writes: list[tuple[str, dict[str, Any]]] = [
        ("chatHistory/updateConversation", {"title": "renamed"}),
        ("chatHistory/saveSummary", {"summary": "s"}),
        ("chatHistory/deleteSummary", {}),
        ("chatHistory/editMessage", {"id": appended[1]["id"], "content": "edited question"}),
        ("chatHistory/deleteTurns", {"turns": [3]}),
        ("chatHistory/truncate", {"fromId": appended[6]["id"]}),
    ]
    for method, params in writes:
        await session.append("b", user("b moves ahead"))
        before = (await listing(session))["conversations"]
        assert before[0]["conversationId"] == "b"
        await session.request(method, {"conversationId": "a", **params})
        after = (await listing(session))["conversations"]
        assert after[0]["conversationId"] == "a", method
        assert after[0]["lastActivity"] >= before[0]["lastActivity"], method


async def test_retention_does_not_count_as_activity(start_session: StartSession, tmp_path: Path):
    folder = tmp_path / "shared"
    writer = await start_session(storage=folder)
    pruner = await start_session(storage=folder, settings={"maxMessages": 2})
    await three_turns(writer, "a")
    before = (await listing(writer))["conversations"][0]
    got = await pruner.request("chatHistory/get", {"conversationId": "a"})
    assert got["pruned"] is not None, "the test could not fail"
    after = (await listing(writer))["conversations"][0]
    assert after["messageCount"] < before["messageCount"]
    assert after["lastActivity"] == before["lastActivity"]


# -- truncate -------------------------------------------------------------------------------------


async def test_truncate_deletes_from_the_row_on_and_append_continues(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    second_prompt = stored[5]
    answer = await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": second_prompt["id"]}
    )
    assert answer == {"deletedMessages": 4, "summaryDeleted": False}
    left = await rows(session, "c")
    assert [r["id"] for r in left] == [r["id"] for r in stored[:5]]
    # edit and resend: the new prompt opens the turn after the highest remaining one
    resent = (await session.append("c", user("second question, better")))["messages"][0]
    assert resent["turn"] == 2 and resent["id"] > stored[-1]["id"]
    # regenerate: truncate from the reply, the new reply joins the prompt's turn
    reply_id = (await session.append("c", assistant("draft")))["messages"][0]["id"]
    await session.request("chatHistory/truncate", {"conversationId": "c", "fromId": reply_id})
    again = (await session.append("c", assistant("better reply")))["messages"][0]
    assert again["turn"] == 2
    (info,) = (await listing(session))["conversations"]
    assert info["messageCount"] == 7
    assert info["tokens"] == sum(r["tokens"] for r in await rows(session, "c"))
    assert session.trimmed == []


async def test_truncate_inside_a_turn_keeps_its_number_for_followers(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[3]["id"]}
    )
    follow = await session.append("c", result("k1", "new result"), assistant("done"))
    assert [r["turn"] for r in follow["messages"]] == [1, 1]
    nxt = await session.append("c", user("next"))
    assert nxt["messages"][0]["turn"] == 2


async def test_truncate_deletes_a_summary_covering_the_cut(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": "covers turn 2", "coversThroughId": stored[6]["id"]},
    )
    keep = await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[7]["id"]}
    )
    assert keep == {"deletedMessages": 2, "summaryDeleted": False}
    gone = await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[6]["id"]}
    )
    assert gone == {"deletedMessages": 1, "summaryDeleted": True}
    assert await session.request("chatHistory/getSummary", {"conversationId": "c"}) is None

    await session.request("chatHistory/saveSummary", {"conversationId": "c", "summary": "free"})
    stays = await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[1]["id"]}
    )
    assert stays == {"deletedMessages": 5, "summaryDeleted": False}
    summary = await session.request("chatHistory/getSummary", {"conversationId": "c"})
    assert summary["summary"] == "free"


async def test_truncate_ids_are_scoped_to_the_conversation(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    other = (await session.append("other", user("not yours")))["messages"][0]
    for bad in (other["id"], other["id"] + 100, 0):
        data = await refused(
            session, "chatHistory/truncate", {"conversationId": "c", "fromId": bad}
        )
        assert data == {"field": "fromId"}
    data = await refused(session, "chatHistory/truncate", {"conversationId": "c"})
    assert data == {"field": "fromId"}
    assert len(await rows(session, "c")) == len(stored)
    assert len(await rows(session, "other")) == 1


async def test_truncate_everything_leaves_an_empty_conversation(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    answer = await session.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[0]["id"]}
    )
    assert answer["deletedMessages"] == len(stored)
    assert (await listing(session))["conversations"] == []
    fresh = (await session.append("c", user("again")))["messages"][0]
    assert fresh["turn"] == 1


# -- deleteTurns ----------------------------------------------------------------------------------


async def test_delete_turns_deletes_whole_turns_and_keeps_numbers(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    await session.request("chatHistory/saveSummary", {"conversationId": "c", "summary": "s"})
    answer = await session.request(
        "chatHistory/deleteTurns", {"conversationId": "c", "turns": [2, 2, 9]}
    )
    assert answer == {"deletedMessages": 2, "deletedTurns": 1}
    left = await rows(session, "c")
    assert [r["turn"] for r in left] == [0, 1, 1, 1, 1, 3, 3]
    assert (await session.request("chatHistory/getSummary", {"conversationId": "c"})) is not None
    turn0 = await session.request("chatHistory/deleteTurns", {"conversationId": "c", "turns": [0]})
    assert turn0 == {"deletedMessages": 1, "deletedTurns": 1}
    assert (await rows(session, "c"))[0]["content"] == "first question"
    nxt = await session.append("c", user("fourth"))
    assert nxt["messages"][0]["turn"] == 4
    prepared = await session.request("chatHistory/prepare", {"conversationId": "c"})
    texts = [m["content"] for m in prepared["body"]["messages"]]
    assert "second question" not in texts and "fourth" in texts
    assert session.trimmed == []
    del stored


@pytest.mark.parametrize(
    ("turns", "field"),
    [([], "turns"), ([1, -1], "turns[1]"), (list(range(1001)), "turns"), ("1", "turns")],
)
async def test_delete_turns_refusals_change_nothing(
    start_session: StartSession, turns: Any, field: str
):
    session = await start_session()
    stored = await three_turns(session)
    data = await refused(
        session, "chatHistory/deleteTurns", {"conversationId": "c", "turns": turns}
    )
    assert data == {"field": field}
    assert len(await rows(session, "c")) == len(stored)


# -- editMessage ----------------------------------------------------------------------------------


async def test_edit_message_replaces_in_place(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    prompt = stored[5]
    edited = await session.request(
        "chatHistory/editMessage",
        {
            "conversationId": "c",
            "id": prompt["id"],
            "content": "second question, reworded at length",
            "metadata": {"edited": True},
        },
    )
    for same in ("id", "role", "turn", "timestamp", "toolCalls", "toolCallId", "name"):
        assert edited[same] == prompt[same], same
    assert edited["content"] == "second question, reworded at length"
    assert edited["metadata"] == {"edited": True}
    assert edited["tokens"] > prompt["tokens"]
    got = await rows(session, "c")
    assert got[5] == edited
    (info,) = (await listing(session))["conversations"]
    assert info["tokens"] == sum(r["tokens"] for r in got)
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
        "rkJggg=="
    )
    with_image = await session.request(
        "chatHistory/editMessage",
        {
            "conversationId": "c",
            "id": prompt["id"],
            "attachments": [{"kind": "image", "mimeType": "image/png", "data": png}],
        },
    )
    assert with_image["content"] == edited["content"]
    assert with_image["attachments"][0]["data"] == png
    assert with_image["tokens"] == edited["tokens"] + 1600
    prepared = await session.request(
        "chatHistory/prepare", {"conversationId": "c", "provider": "openai"}
    )
    assert "second question, reworded at length" in str(prepared["body"])


async def test_edit_of_a_tool_result_is_cut_like_an_append(start_session: StartSession):
    session = await start_session(settings={"maxToolResultChars": 30})
    stored = await three_turns(session)
    edited = await session.request(
        "chatHistory/editMessage",
        {"conversationId": "c", "id": stored[3]["id"], "content": "r" * 100},
    )
    assert "characters truncated" in edited["content"]
    assert edited["toolCallId"] == "k1"


@pytest.mark.parametrize(
    ("index", "params", "field"),
    [
        (1, {"content": "[Tool results] sneaky"}, "content"),
        (1, {"content": 5}, "content"),
        (1, {"metadata": [3]}, "metadata"),
        (1, {"attachments": [{"kind": "video"}]}, "attachments[0].kind"),
    ],
)
async def test_edit_message_refusals_change_nothing(
    start_session: StartSession, index: int, params: dict[str, Any], field: str
):
    session = await start_session()
    stored = await three_turns(session)
    data = await refused(
        session,
        "chatHistory/editMessage",
        {"conversationId": "c", "id": stored[index]["id"], **params},
    )
    assert data == {"field": field}
    assert await rows(session, "c") == stored


async def test_edit_cannot_turn_a_tool_results_row_into_a_prompt(start_session: StartSession):
    session = await start_session()
    appended = await session.append(
        "c", user("q"), assistant("calling"), user("[Tool results] x"), assistant("a")
    )
    row = appended["messages"][2]
    data = await refused(
        session,
        "chatHistory/editMessage",
        {"conversationId": "c", "id": row["id"], "content": "a real prompt now"},
    )
    assert data == {"field": "content"}
    ok = await session.request(
        "chatHistory/editMessage",
        {"conversationId": "c", "id": row["id"], "content": "[Tool results] y"},
    )
    assert ok["content"] == "[Tool results] y"


async def test_edit_message_ids_are_scoped(start_session: StartSession):
    session = await start_session()
    await three_turns(session)
    other = (await session.append("other", user("not yours")))["messages"][0]
    for bad in (other["id"], 10_000):
        data = await refused(
            session, "chatHistory/editMessage", {"conversationId": "c", "id": bad, "content": "x"}
        )
        assert data == {"field": "id"}
    assert (await rows(session, "other"))[0]["content"] == "not yours"


# -- fork -----------------------------------------------------------------------------------------


async def test_fork_copies_rows_summary_title_and_metadata(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    await session.request(
        "chatHistory/updateConversation",
        {"conversationId": "c", "title": "Original", "metadata": {"color": "red"}},
    )
    await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": "turn 1", "coversThroughId": stored[4]["id"]},
    )
    info = await session.request(
        "chatHistory/fork",
        {"conversationId": "c", "newConversationId": "f", "throughId": stored[6]["id"]},
    )
    assert set(info) == INFO_FIELDS
    assert info["conversationId"] == "f" and info["workspace"] == "default"
    assert info["title"] == "Original (fork)" and info["titleSource"] == "user"
    assert info["metadata"] == {"color": "red"} and info["hasSummary"] is True
    assert info["messageCount"] == 7
    copied = await rows(session, "f")
    assert len(copied) == 7
    for old, new in zip(stored[:7], copied, strict=True):
        assert new["id"] > stored[-1]["id"]
        for same in ("role", "content", "turn", "timestamp", "toolCalls", "toolCallId", "tokens"):
            assert new[same] == old[same], same
    summary = await session.request("chatHistory/getSummary", {"conversationId": "f"})
    assert summary["summary"] == "turn 1" and summary["coversThroughId"] == copied[4]["id"]
    assert info["tokens"] == sum(r["tokens"] for r in copied)
    # the fork is a conversation of its own: the source is untouched, appends continue turns
    assert len(await rows(session, "c")) == len(stored)
    nxt = await session.append("f", user("branch"))
    assert nxt["messages"][0]["turn"] == 3
    prepared = await session.request("chatHistory/prepare", {"conversationId": "f"})
    assert prepared["body"]["messages"][-1]["content"] == "branch"


async def test_fork_into_another_workspace_with_a_long_title(start_session: StartSession):
    session = await start_session()
    await three_turns(session)
    await session.request(
        "chatHistory/updateConversation", {"conversationId": "c", "title": "t" * 200}
    )
    await session.request(
        "chatHistory/saveSummary",
        {"conversationId": "c", "summary": "no coverage"},
    )
    info = await session.request(
        "chatHistory/fork",
        {"conversationId": "c", "newConversationId": "c", "newWorkspace": "file:///elsewhere"},
    )
    assert info["workspace"] == "file:///elsewhere" and info["messageCount"] == 9
    assert info["title"] == "t" * 193 + " (fork)" and len(info["title"]) == 200
    assert info["hasSummary"] is False
    copied = await rows(session, "c", workspace="file:///elsewhere")
    assert [r["content"] for r in copied] == [r["content"] for r in await rows(session, "c")]


async def test_fork_without_a_user_title_gets_the_automatic_one(start_session: StartSession):
    session = await start_session()
    await three_turns(session)
    info = await session.request(
        "chatHistory/fork", {"conversationId": "c", "newConversationId": "f"}
    )
    assert info["title"] == "first question" and info["titleSource"] == "auto"


async def test_fork_refusals_name_the_field(start_session: StartSession):
    session = await start_session()
    stored = await three_turns(session)
    other = (await session.append("other", user("x")))["messages"][0]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"newConversationId": "other"}, "newConversationId"),
        ({"newConversationId": ""}, "newConversationId"),
        ({"newConversationId": "f", "throughId": other["id"]}, "throughId"),
        ({"newConversationId": "f", "throughId": stored[-1]["id"] + 1000}, "throughId"),
        ({"newConversationId": "f", "newWorkspace": 3}, "newWorkspace"),
        ({}, "newConversationId"),
    ]
    for params, field in cases:
        data = await refused(session, "chatHistory/fork", {"conversationId": "c", **params})
        assert data == {"field": field}, params
    data = await refused(
        session, "chatHistory/fork", {"conversationId": "nothing", "newConversationId": "f"}
    )
    assert data == {"field": "conversationId"}
    # a target holding only a title already exists too
    await session.request(
        "chatHistory/updateConversation", {"conversationId": "named", "title": "taken"}
    )
    data = await refused(
        session, "chatHistory/fork", {"conversationId": "c", "newConversationId": "named"}
    )
    assert data == {"field": "newConversationId"}
    names = {c["conversationId"] for c in (await listing(session))["conversations"]}
    assert names == {"c", "other", "named"}


# -- deleteSummary --------------------------------------------------------------------------------


async def test_delete_summary(start_session: StartSession):
    session = await start_session()
    await session.append("c", user("q"))
    await session.request("chatHistory/saveSummary", {"conversationId": "c", "summary": "s"})
    assert await session.request("chatHistory/deleteSummary", {"conversationId": "c"}) == {
        "deleted": True
    }
    assert await session.request("chatHistory/getSummary", {"conversationId": "c"}) is None
    assert await session.request("chatHistory/deleteSummary", {"conversationId": "c"}) == {
        "deleted": False
    }


# -- retention settings do not block the edits ----------------------------------------------------


async def test_edits_are_not_blocked_by_retention_and_notify_nothing(
    start_session: StartSession, tmp_path: Path
):
    folder = tmp_path / "shared"
    writer = await start_session(storage=folder)
    strict = await start_session(storage=folder, settings={"maxMessages": 2})
    stored = await three_turns(writer)
    # retention would delete turns 1 and 2 first; these requests act on what the client saw
    answer = await strict.request("chatHistory/deleteTurns", {"conversationId": "c", "turns": [1]})
    assert answer == {"deletedMessages": 4, "deletedTurns": 1}
    answer = await strict.request(
        "chatHistory/truncate", {"conversationId": "c", "fromId": stored[7]["id"]}
    )
    assert answer == {"deletedMessages": 2, "summaryDeleted": False}
    edited = await strict.request(
        "chatHistory/editMessage",
        {"conversationId": "c", "id": stored[5]["id"], "content": "kept"},
    )
    assert edited["content"] == "kept"
    assert strict.trimmed == []
    assert [r["turn"] for r in await rows(writer, "c")] == [0, 2, 2]


# -- two processes on one database ----------------------------------------------------------------


async def test_another_process_sees_every_edit_at_once(start_session: StartSession, tmp_path: Path):
    folder = tmp_path / "shared"
    one = await start_session(storage=folder)
    two = await start_session(storage=folder)
    stored = await three_turns(one)
    # warm the second process's cache and remembered tail
    assert len(await rows(two, "c")) == len(stored)
    await two.request("chatHistory/prepare", {"conversationId": "c"})

    await one.request("chatHistory/truncate", {"conversationId": "c", "fromId": stored[7]["id"]})
    assert len(await rows(two, "c")) == 7
    prepared = await two.request("chatHistory/prepare", {"conversationId": "c"})
    assert "third question" not in str(prepared["body"])

    await one.request(
        "chatHistory/editMessage",
        {"conversationId": "c", "id": stored[5]["id"], "content": "second, edited elsewhere"},
    )
    assert (await rows(two, "c"))[5]["content"] == "second, edited elsewhere"
    prepared = await two.request("chatHistory/prepare", {"conversationId": "c"})
    assert "second, edited elsewhere" in str(prepared["body"])

    await one.request("chatHistory/deleteTurns", {"conversationId": "c", "turns": [2]})
    assert [r["turn"] for r in await rows(two, "c")] == [0, 1, 1, 1, 1]
    prepared = await two.request("chatHistory/prepare", {"conversationId": "c"})
    assert "second, edited elsewhere" not in str(prepared["body"])
    # the second process appends after the first one's edits: turns continue from what remains
    appended = await two.append("c", user("from two"))
    assert appended["messages"][0]["turn"] == 2

    await two.request("chatHistory/fork", {"conversationId": "c", "newConversationId": "f"})
    assert len(await rows(one, "f")) == 6
    await one.request("chatHistory/updateConversation", {"conversationId": "f", "title": "T"})
    listed = {c["conversationId"]: c for c in (await listing(two))["conversations"]}
    assert listed["f"]["title"] == "T"
    await two.request("chatHistory/clear", {"conversationId": "f"})
    assert "f" not in {c["conversationId"] for c in (await listing(one))["conversations"]}
