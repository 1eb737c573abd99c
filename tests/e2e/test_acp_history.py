"""The history view through ``chat-history acp`` (docs/acp.md "The history view"; issue 44 item
2), driven by the official SDK's client over real processes: ``session/list`` with ``limit``,
newest activity first, rows with ``state``, ``lastTurnEndedAt``, ``cost`` and ``archived``, a
cursor whose pages are never empty while more remain (5,000 sessions walked while another window
writes), ``session/list_changed`` to the editors that asked for it, archive and rename."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ListSessionsResponse
from tests.e2e.acp_peers.client import editor_session
from tests.e2e.test_acp_life import key_of

from chat_history.model import Key, Message
from chat_history.service import conversations, history
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager

SESSIONS = 5_000
ARCHIVED = range(0, SESSIONS, 97)  # every 97th: hidden unless asked
#: 2026-01-01 in epoch ms: the seeded sessions' activity, before anything this test writes live.
EPOCH = 1_767_225_600_000


def seed(db: Path, cwd: Path, other: Path) -> None:
    """5,000 sessions of ``cwd`` (three at a time share their last activity, so the order's
    tie-break by id is walked too), the panel's own chats among them, and sessions of another
    folder that shares a prefix of the name; every 97th session archived."""
    at = [EPOCH]
    manager = ChatHistoryManager.open(db)
    try:
        timed = ChatHistoryManager(manager.store, clock=lambda: at[0])
        for i in range(SESSIONS):
            at[0] = EPOCH + (i // 3) * 1000
            asked = Message(role="user", content=f"ask {i}")
            rows = [asked, Message(role="assistant", content="ok")]
            history.append(timed, key_of(cwd, f"s{i:05}"), rows)
            if i % 10 == 0:
                panel = Key(key_of(cwd, "x").workspace, f"panel-{i}")
                history.append(timed, panel, [Message(role="user", content="a panel chat")])
            if i % 50 == 0:
                history.append(timed, key_of(other, f"o{i:05}"), rows)
        for i in ARCHIVED:
            at[0] = EPOCH + (i // 3) * 1000  # the archive keeps its place in this test's order
            archive = ConversationUpdate(metadata={"archived": True})
            conversations.update(timed, key_of(cwd, f"s{i:05}"), archive)
    finally:
        manager.close()


async def walk(
    conn: Any,
    params: dict[str, Any],
    pages: list[list[dict[str, Any]]] | None = None,
    pause: float = 0.0,
) -> list[dict[str, Any]]:
    """Every page of a list (``pause`` s between two), each checked against the SDK's model;
    no page is empty unless it is the only one, and a page that has a cursor is full."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        asked = {**params, **({"cursor": cursor} if cursor else {})}
        page = await asyncio.wait_for(conn._conn.send_request("session/list", asked), 30)
        ListSessionsResponse.model_validate(page)
        assert page["sessions"] or (cursor is None and "nextCursor" not in page)
        assert len(page["sessions"]) <= params.get("limit", 50)
        if pages is not None:
            pages.append(page["sessions"])
        found += page["sessions"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return found
        assert len(page["sessions"]) == params.get("limit", 50)
        await asyncio.sleep(pause)


def order(row: dict[str, Any]) -> tuple[str, str]:
    """What the list is sorted by: newest ``updatedAt`` first, then the session id (the
    timestamps have one format, so their text sorts as they do)."""
    return (row["updatedAt"], row["sessionId"])


def in_order(rows: list[dict[str, Any]]) -> bool:
    """Strictly in the list's order: newest first, ties by id."""
    keys = [order(r) for r in rows]
    return all(a[0] > b[0] or (a[0] == b[0] and a[1] < b[1]) for a, b in itertools.pairwise(keys))


async def until_async(check: Any, seconds: float = 30) -> None:
    """Wait until ``check()`` is true."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.01)


class Writer(threading.Thread):
    """Another window on the same database while the editor walks the list: it starts new
    sessions and appends to old ones, noting which."""

    def __init__(self, db: Path, cwd: Path) -> None:
        super().__init__(daemon=True)
        self.db, self.cwd = db, cwd
        self.stop = threading.Event()
        self.touched: set[str] = set()
        self.new: set[str] = set()

    def run(self) -> None:
        manager = ChatHistoryManager.open(self.db)
        try:
            n = 0
            while not self.stop.is_set():
                old = f"s{(n * 37) % SESSIONS:05}"
                self.touched.add(old)  # before the write: a walk may see it moved at once
                more = [Message(role="user", content="more")]
                history.append(manager, key_of(self.cwd, old), more)
                new = f"new{n:04}"
                self.new.add(new)
                history.append(manager, key_of(self.cwd, new), [Message(role="user", content="hi")])
                n += 1
                time.sleep(0.005)
        finally:
            manager.close()


async def test_walking_5000_sessions_while_another_window_writes(tmp_path: Path) -> None:
    db, cwd, other = tmp_path / "h.db", tmp_path / "project", tmp_path / "project-two"
    cwd.mkdir()
    other.mkdir()
    seed(db, cwd, other)
    archived = {f"s{i:05}" for i in ARCHIVED}
    everyone = {f"s{i:05}" for i in range(SESSIONS)}
    async with editor_session(db, {}) as (conn, _, _p):
        quiet = await walk(conn, {"cwd": str(cwd), "limit": 50})
        ids = [r["sessionId"] for r in quiet]
        assert len(ids) == len(set(ids)) == SESSIONS - len(archived)
        assert set(ids) == everyone - archived  # no panel chat, no other folder's, none archived
        assert in_order(quiet)
        assert ids[:5] == ["s04998", "s04999", "s04995", "s04996", "s04997"]  # ties: by id
        assert {r["cwd"] for r in quiet} == {str(cwd)}

        writer = Writer(db, cwd)
        writer.start()
        pages: list[list[dict[str, Any]]] = []
        try:
            await until_async(lambda: len(writer.new) >= 3)
            began = len(writer.new)
            busy = await walk(conn, {"cwd": str(cwd), "limit": 50}, pages, pause=0.01)
            ended = len(writer.new)
        finally:
            writer.stop.set()
            writer.join()
        assert ended > began  # it wrote while the editor walked
        ids = [r["sessionId"] for r in busy]
        assert len(ids) == len(set(ids))  # no session twice
        assert in_order(busy)  # one position after another: a moved session is not met again
        missing = (everyone - archived - writer.touched) - set(ids)
        assert not missing  # every session nobody touched meanwhile, once
        assert len(pages) >= (SESSIONS - len(archived) - len(writer.touched)) // 50

        settled = await walk(conn, {"cwd": str(cwd), "limit": 50})
        ids = [r["sessionId"] for r in settled]
        assert sorted(ids) == sorted(everyone - archived | writer.new)
        assert in_order(settled)

        with_archived = await walk(conn, {"cwd": str(cwd), "limit": 1000, "archived": True})
        assert {r["sessionId"] for r in with_archived} == everyone | writer.new
        assert {r["sessionId"] for r in with_archived if r["archived"]} == archived

        theirs = await walk(conn, {"cwd": str(other), "limit": 7})
        assert {r["sessionId"] for r in theirs} == {f"o{i:05}" for i in range(0, SESSIONS, 50)}


def row_of(page: dict[str, Any], session: str) -> dict[str, Any]:
    return next(r for r in page["sessions"] if r["sessionId"] == session)


async def listed(conn: Any, **params: Any) -> dict[str, Any]:
    page: dict[str, Any] = await asyncio.wait_for(
        conn._conn.send_request("session/list", params), 30
    )
    return page


async def until(check: Any, seconds: float = 10) -> None:
    """Wait until ``check()`` (a coroutine function) is true."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.05)


async def test_rows_say_what_a_history_view_shows(tmp_path: Path) -> None:
    """A row: the title, ``updatedAt``, ``state`` (running while a reply streams, idle after,
    requires_action while the agent waits on the editor's answer), ``lastTurnEndedAt``, the
    agent's reported ``cost`` and context figures, ``archived``; the capabilities say so."""
    db, cwd = tmp_path / "h.db", tmp_path / "project"
    cwd.mkdir()
    async with editor_session(db, {}) as (conn, editor, _p):
        caps = await conn._conn.send_request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": {}}
        )
        declared = caps["agentCapabilities"]["sessionCapabilities"]
        assert declared["list"] == {"limit": {}, "changes": {}}
        assert declared["archive"] == {} and declared["setTitle"] == {}

        session = (await conn.new_session(cwd=str(cwd))).session_id
        before = time.time()
        await asyncio.wait_for(
            conn.prompt(prompt=[text_block("report the usage")], session_id=session), 60
        )
        row = row_of(await listed(conn, cwd=str(cwd)), session)
        ended = row["lastTurnEndedAt"]
        assert row["title"] == "report the usage" and row["state"] == "idle"
        assert row["cost"] == {"amount": 0.25, "currency": "USD"}
        assert row["_meta"]["chatHistory"]["used"] == 1200
        assert row["_meta"]["chatHistory"]["size"] == 200000
        assert row["_meta"]["chatHistory"]["tokens"] > 0
        assert row["archived"] is False and row["cwd"] == str(cwd)
        assert row["updatedAt"] >= ended > time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(before))

        turn = asyncio.ensure_future(
            conn.prompt(prompt=[text_block("slow answer please")], session_id=session)
        )

        async def running() -> bool:
            return row_of(await listed(conn, cwd=str(cwd)), session)["state"] == "running"

        await until(running)
        mid = row_of(await listed(conn, cwd=str(cwd)), session)
        assert mid["lastTurnEndedAt"] == ended  # the turn before this one
        assert mid["cost"] == row["cost"]  # this reply reported none yet: the newest stands
        await asyncio.wait_for(turn, 60)
        after = row_of(await listed(conn, cwd=str(cwd)), session)
        assert after["state"] == "idle" and after["lastTurnEndedAt"] > ended

        editor.hold = asyncio.Event()
        asking = asyncio.ensure_future(
            conn.prompt(prompt=[text_block("ask permission first")], session_id=session)
        )

        async def waiting() -> bool:
            state = row_of(await listed(conn, cwd=str(cwd)), session)["state"]
            return bool(state == "requires_action")

        await until(waiting)
        editor.hold.set()
        await asyncio.wait_for(asking, 60)
        assert row_of(await listed(conn, cwd=str(cwd)), session)["state"] == "idle"


async def test_list_changed_goes_to_editors_that_asked(tmp_path: Path) -> None:
    """Another window's new session, reply, rename and archive reach an editor that declared
    ``session/list_changed`` and listed the folder; never one that did not declare it, and not
    for a folder it only listed without naming it."""
    db, cwd, other = tmp_path / "h.db", tmp_path / "project", tmp_path / "elsewhere"
    cwd.mkdir()
    other.mkdir()
    async with (
        editor_session(db, {}, listens=True) as (watcher, seen, _a),
        editor_session(db, {}) as (deaf, unheard, _b),
        editor_session(db, {}, cwd=other, listens=True) as (lazy, idle, _c),
        editor_session(db, {}) as (writer, _w, _d),
    ):
        for conn in (watcher, deaf):
            await listed(conn, cwd=str(cwd))
        await listed(lazy)  # its own folder, not named: not watched
        session = (await writer.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(writer.prompt(prompt=[text_block("hello")], session_id=session), 60)

        async def told() -> bool:
            return bool(seen.changed)

        await until(told)
        assert seen.changed[0] == {"cwd": str(cwd)}
        assert row_of(await listed(watcher, cwd=str(cwd)), session)["title"] == "hello"

        for method, params in (
            ("session/set_title", {"sessionId": session, "title": "Renamed"}),
            ("session/archive", {"sessionId": session}),
        ):
            seen.changed.clear()
            assert await writer._conn.send_request(method, params) == {}
            await until(told)
            assert seen.changed == [{"cwd": str(cwd)}]  # bursts coalesce

        seen.changed.clear()
        elsewhere = (await writer.new_session(cwd=str(other))).session_id
        await asyncio.wait_for(writer.prompt(prompt=[text_block("x")], session_id=elsewhere), 60)
        await asyncio.sleep(1.5)  # three looks of the watch
        assert seen.changed == []  # another folder's session: not this list
        assert unheard.changed == [] and idle.changed == []


async def test_archive_and_rename(tmp_path: Path) -> None:
    """``session/archive`` hides a session from the default list (``archived: true`` lists it
    again, flagged), ``session/unarchive`` brings it back, both are idempotent; ``set_title``
    sets the title (null: back to the automatic one). The editor that has the session open
    gets ``session_info_update``. A session neither the store nor the agent knows is -32002."""
    db, cwd = tmp_path / "h.db", tmp_path / "project"
    cwd.mkdir()
    async with editor_session(db, {}) as (conn, editor, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(conn.prompt(prompt=[text_block("first")], session_id=session), 60)
        editor.take()
        for _ in range(2):
            assert await conn._conn.send_request("session/archive", {"sessionId": session}) == {}
        shown = (await listed(conn, cwd=str(cwd)))["sessions"]
        assert session not in {r["sessionId"] for r in shown}
        flagged = row_of(await listed(conn, cwd=str(cwd), archived=True), session)
        assert flagged["archived"] is True
        for _ in range(2):
            await conn._conn.send_request("session/unarchive", {"sessionId": session})
        assert row_of(await listed(conn, cwd=str(cwd)), session)["archived"] is False

        await conn._conn.send_request("session/set_title", {"sessionId": session, "title": "Mine"})
        assert row_of(await listed(conn, cwd=str(cwd)), session)["title"] == "Mine"
        await conn._conn.send_request("session/set_title", {"sessionId": session, "title": None})
        assert row_of(await listed(conn, cwd=str(cwd)), session)["title"] == "first"
        told = [u for u in editor.take() if u["sessionUpdate"] == "session_info_update"]
        # the archive's two changes (the SDK's 0.12 model drops ``archived``), the two titles
        assert len(told) == 4 and [u["title"] for u in told if "title" in u] == ["Mine", "first"]

        for method in ("session/archive", "session/unarchive", "session/set_title"):
            with pytest.raises(RequestError) as refused:
                await conn._conn.send_request(method, {"sessionId": "nobody", "title": "x"})
            assert refused.value.code == -32002

    manager = ChatHistoryManager.open(db)
    try:
        info = conversations.info(manager, key_of(cwd, session))
        assert info.title == "first" and info.message_count == 3
        note = json.loads(info.metadata.text)["acp"]
        assert set(note) == {"lastTurnEndedAt"}  # the agent reported no usage
    finally:
        manager.close()


async def test_sessions_of_the_other_worktrees(tmp_path: Path) -> None:
    """``includeWorktrees``: the sessions of the same folder in the repository's other git
    worktrees too, each row with its own ``cwd``, in one order across them, paged with one
    cursor; a worktree whose folder is gone is left out; without it, the folder's alone."""
    import subprocess

    main, linked, gone = tmp_path / "main", tmp_path / "linked", tmp_path / "gone"
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(main)], check=True)
    subprocess.run([*git, "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    for tree, branch in ((linked, "one"), (gone, "two")):
        subprocess.run([*git, "-C", str(main), "worktree", "add", "-q", str(tree), "-b", branch])
    db = tmp_path / "h.db"
    at = [EPOCH]
    manager = ChatHistoryManager.open(db)
    try:
        timed = ChatHistoryManager(manager.store, clock=lambda: at[0])
        for i in range(30):
            at[0] = EPOCH + (i // 2) * 1000  # ties across the trees
            tree = (main, linked, gone)[i % 3]
            history.append(timed, key_of(tree, f"t{i:02}"), [Message(role="user", content="q")])
    finally:
        manager.close()
    subprocess.run(["rm", "-rf", str(gone)], check=True)
    async with editor_session(db, {}) as (conn, _, _p):
        both = await walk(conn, {"cwd": str(main), "limit": 4, "includeWorktrees": True})
        expected = {f"t{i:02}": (main, linked, gone)[i % 3] for i in range(30) if i % 3 != 2}
        assert {r["sessionId"]: Path(r["cwd"]) for r in both} == expected
        assert len(both) == len(expected)
        assert in_order(both)  # one order across the trees, ties by id
        alone = await walk(conn, {"cwd": str(main), "limit": 4})
        assert {r["sessionId"] for r in alone} == {s for s, t in expected.items() if t == main}
        from_linked = await walk(conn, {"cwd": str(linked), "includeWorktrees": True})
        assert {r["sessionId"] for r in from_linked} == set(expected)
        with pytest.raises(RequestError) as refused:  # a cursor of the wider list
            page = await listed(conn, cwd=str(main), limit=1, includeWorktrees=True)
            await listed(conn, cwd=str(tmp_path), cursor=page["nextCursor"])
        assert refused.value.code == -32602
