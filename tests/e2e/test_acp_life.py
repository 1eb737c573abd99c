"""``chat-history acp`` in front of the SDK-built agent, driven by the SDK's client over real
processes (protocol.md "Version 4" → ACP sessions): a whole life of a session, and how each row
is stored while the reply streams."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from acp import text_block
from tests.e2e.acp_peers.client import editor_session

from chat_history.acp.rows import CHUNKS
from chat_history.model import Key, StoredMessage
from chat_history.policy.search.rank import SearchScope
from chat_history.service import conversations, history, search
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import resolve


def coalesced(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the client saw less the chunking: adjacent text chunks of one kind merged."""
    out: list[dict[str, Any]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if out and kind in CHUNKS and out[-1]["sessionUpdate"] == kind:
            out[-1] = {
                **out[-1],
                "content": {
                    "type": "text",
                    "text": out[-1]["content"]["text"] + update["content"]["text"],
                },
            }
        else:
            out.append(update)
    return out


def key_of(cwd: Path, session: str) -> Key:
    return Key(resolve(cwd.as_uri(), "folder").workspace, f"acp:{session}")


async def test_a_whole_life(tmp_path: Path) -> None:
    db, cwd = tmp_path / "history.db", tmp_path / "project"
    cwd.mkdir()
    log, pid = tmp_path / "agent.log", tmp_path / "agent.pid"
    env = {"ACP_AGENT_LOG": str(log), "ACP_AGENT_PID": str(pid)}
    async with editor_session(db, env) as (conn, editor, _):
        new = await conn.new_session(cwd=str(cwd))
        session = new.session_id
        seen: list[dict[str, Any]] = []
        prompts = ["fix the retry loop", "add a test", "rename it"]
        for text in prompts:
            answer = await asyncio.wait_for(
                conn.prompt(prompt=[text_block(text)], session_id=session), 60
            )
            assert answer.stop_reason == "end_turn"
            seen.extend(coalesced(editor.take()))  # each reply's own chunks
        assert sum(u["sessionUpdate"] == "tool_call" for u in seen) == 3

        first_agent = int(pid.read_text())
        os.kill(first_agent, signal.SIGKILL)
        for _ in range(600):  # until the proxy has reaped it (it knows then), not a fixed wait
            if not Path(f"/proc/{first_agent}").exists():
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the killed agent was never reaped")

        listed = await conn.list_sessions(cwd=str(cwd))
        mine = [s for s in listed.sessions if s.session_id == session]
        assert mine and mine[0].title and "retry" in mine[0].title

        await asyncio.wait_for(conn.load_session(cwd=str(cwd), session_id=session), 60)
        replayed = editor.take()
        user = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in user] == prompts
        others = [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"]
        assert others == seen

        await asyncio.wait_for(conn.prompt(prompt=[text_block("and now?")], session_id=session), 60)
        assert int(pid.read_text()) != first_agent  # a new agent process
        received = [json.loads(line) for line in log.read_text().splitlines()]
        last = received[-1]
        assert last["session"] != session  # the new agent session, bound to the editor's id
        assert "<earlier-conversation>" in last["texts"][0]
        for text in prompts:
            assert text in last["texts"][0]
        assert last["texts"][-1] == "and now?"
        assert all("<earlier-conversation>" not in r["texts"][0] for r in received[:3])
        assert all(s == session for s, _ in editor.updates)  # updates come back under its id
        editor.take()

        fork = await conn.fork_session(session_id=session, cwd=str(cwd))
        assert fork.session_id != session
        await conn._conn.send_request("session/delete", {"sessionId": session})
        listed = await conn.list_sessions(cwd=str(cwd))
        ids = {s.session_id for s in listed.sessions}
        assert session not in ids and fork.session_id in ids

    manager = ChatHistoryManager.open(db)
    try:
        gone, forked = key_of(cwd, session), key_of(cwd, fork.session_id)
        assert conversations.info(manager, gone).message_count == 0
        assert history.get_summary(manager, gone) is None
        roles = ("user", "assistant", "tool")
        found = search.search(
            manager, SearchScope(gone.workspace, gone.conversation, roles), "retry", 10
        )
        assert found.hits == ()  # nothing left in the search index either
        kept = search.search(
            manager, SearchScope(forked.workspace, forked.conversation, roles), "retry", 10
        )
        assert kept.hits  # the fork's copy is still found
        rows, _ = history.whole(manager, key_of(cwd, fork.session_id))
        assert [r.role for r in rows].count("user") == 4
        assert all(r.status == "complete" for r in rows)
    finally:
        manager.close()


async def streaming_row(db: Path, key: Key) -> StoredMessage:
    """The assistant row of ``key`` as soon as it is stored streaming with some text."""
    manager = ChatHistoryManager.open(db)
    try:
        for _ in range(400):
            rows, _ = history.whole(manager, key)
            if len(rows) == 2 and rows[1].status == "streaming" and rows[1].content:
                return rows[1]
            await asyncio.sleep(0.05)
        raise AssertionError("the reply was never seen streaming")
    finally:
        manager.close()


async def test_rows_of_a_session(tmp_path: Path) -> None:
    """One user row per prompt, one assistant row per reply with its tool calls, one tool row
    per result; the reply is in the store while it streams."""
    db, cwd = tmp_path / "history.db", tmp_path / "project"
    cwd.mkdir()
    async with editor_session(db, {}) as (conn, _editor, _):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(prompt=[text_block("slow please")], session_id=session)
        )
        streaming = await streaming_row(db, key_of(cwd, session))
        assert streaming.content.startswith("Let me")  # in the store before the reply ends
        await asyncio.wait_for(turn, 60)
    manager = ChatHistoryManager.open(db)
    try:
        rows, _ = history.whole(manager, key_of(cwd, session))
        assert [r.role for r in rows] == ["user", "assistant", "tool"]
        assert rows[0].content == "slow please"
        assert rows[1].content == "Let me look at that.Done: slow please"
        assert [c.name for c in rows[1].tool_calls] == ["read"]
        assert rows[1].tool_calls[0].arguments == {"path": "notes.txt"}
        assert rows[2].tool_call_id == rows[1].tool_calls[0].id
        assert rows[2].content == "notes for slow please"
        assert rows[1].status == "complete"
    finally:
        manager.close()


async def test_served_list_pages(tmp_path: Path) -> None:
    """The proxy serves ``session/list`` (the SDK agent lacks it) in pages of ``PAGE`` with the
    store's cursor, skipping the workspace's panel chats; a cursor it did not hand out is -32602."""
    from acp import RequestError

    from chat_history.acp.listing import PAGE
    from chat_history.model import Message

    db, cwd = tmp_path / "history.db", tmp_path / "project"
    cwd.mkdir()
    manager = ChatHistoryManager.open(db)
    try:
        for i in range(PAGE + 7):
            history.append(
                manager, key_of(cwd, f"s{i:03}"), [Message(role="user", content=f"ask {i}")]
            )
            if i % 10 == 0:  # the panel's own chats in the same workspace: not sessions
                panel = Key(key_of(cwd, "x").workspace, f"panel-{i}")
                history.append(manager, panel, [Message(role="user", content="a panel chat")])
    finally:
        manager.close()
    async with editor_session(db, {}) as (conn, _, _):
        first = await conn.list_sessions(cwd=str(cwd))
        assert len(first.sessions) == PAGE and first.next_cursor
        second = await conn.list_sessions(cwd=str(cwd), cursor=first.next_cursor)
        assert len(second.sessions) == 7 and second.next_cursor is None
        ids = [s.session_id for s in first.sessions + second.sessions]
        assert sorted(ids) == [f"s{i:03}" for i in range(PAGE + 7)]  # each once, no panel chat
        try:
            await conn.list_sessions(cwd=str(cwd), cursor="not-a-cursor")
        except RequestError as error:
            assert error.code == -32602 and "cursor" in str(error)
        else:
            raise AssertionError("a cursor the store did not hand out was accepted")


async def test_a_list_without_cwd_is_the_proxys_own_workspace(tmp_path: Path) -> None:
    """ACP lists the sessions "of a cwd": without one, the folder the editor started the proxy
    in; another workspace's sessions only when its ``cwd`` is asked for."""
    from acp import RequestError

    from chat_history.model import Message

    db, home, other = tmp_path / "history.db", tmp_path / "project", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    manager = ChatHistoryManager.open(db)
    try:
        history.append(manager, key_of(home, "mine"), [Message(role="user", content="here")])
        history.append(
            manager, key_of(other, "theirs"), [Message(role="user", content="elsewhere")]
        )
    finally:
        manager.close()
    async with editor_session(db, {}, cwd=home) as (conn, _, _):
        listed = await conn.list_sessions()
        assert [(s.session_id, s.cwd) for s in listed.sessions] == [("mine", str(home))]
        asked = await conn.list_sessions(cwd=str(other))
        assert [(s.session_id, s.cwd) for s in asked.sessions] == [("theirs", str(other))]
        try:
            await conn._conn.send_request("session/list", {"cwd": 5})
        except RequestError as error:
            assert error.code == -32602 and "cwd" in str(error)
        else:
            raise AssertionError("a cwd that is not a path was accepted")
