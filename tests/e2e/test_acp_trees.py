"""``chat-history acp`` serving ``session/fork`` at a message (the ACP draft's ``messageId``)
from the store's conversation tree (protocol.md "Version 5" → Conversation trees), for an agent
that has no fork of its own: the SDK-built test agent, driven by the SDK's client over real
processes. The SDK 0.12's models know no ``messageId`` on a fork or a prompt: those requests go
out as the wire's JSON through the SDK's connection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.client.connection import ClientSideConnection
from tests.e2e.acp_peers.client import editor_session

from chat_history.model import Follow, Key, Message, StoredMessage
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import resolve

PROMPTS = ["fix the retry loop", "add a test", "rename it"]


def key_of(cwd: Path, session: str) -> Key:
    return Key(resolve(cwd.as_uri(), "folder").workspace, f"acp:{session}")


def stored(db: Path, key: Key) -> list[StoredMessage]:
    """The conversation's active path, read as another process would."""
    manager = ChatHistoryManager.open(db)
    try:
        rows, _ = history.whole(manager, key)
        return rows
    finally:
        manager.close()


async def fork(
    conn: ClientSideConnection, session: str, cwd: Path, message_id: Any
) -> dict[str, Any]:
    params = {"sessionId": session, "cwd": str(cwd), "messageId": message_id}
    answer: dict[str, Any] = await asyncio.wait_for(
        conn._conn.send_request("session/fork", params), 60
    )
    return answer


async def refused(conn: ClientSideConnection, session: str, cwd: Path, message_id: Any) -> str:
    with pytest.raises(RequestError) as raised:
        await fork(conn, session, cwd, message_id)
    assert raised.value.code == -32602
    return str(raised.value)


async def test_a_fork_at_a_message_copies_the_path_through_it(tmp_path: Path, cwd: Path) -> None:
    db, log = tmp_path / "history.db", tmp_path / "agent.log"
    async with editor_session(db, {"ACP_AGENT_LOG": str(log)}) as (conn, editor, _):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        for text in PROMPTS:
            await asyncio.wait_for(conn.prompt(prompt=[text_block(text)], session_id=session), 60)
        key = key_of(cwd, session)
        rows = stored(db, key)
        users = [row for row in rows if row.role == "user"]
        replies = [row for row in rows if row.role == "assistant"]
        assert [row.content for row in users] == PROMPTS

        # at the first reply, named by its id in the store: that exchange, its tool row too
        first = await fork(conn, session, cwd, str(replies[0].id))
        target = first["sessionId"]
        assert target != session
        copied = stored(db, key_of(cwd, target))
        assert [row.role for row in copied] == ["user", "assistant", "tool"]
        assert copied[0].content == PROMPTS[0] and copied[1].content == replies[0].content
        # the new agent session gets that path as its earlier conversation, nothing after it
        editor.take()
        await asyncio.wait_for(conn.prompt(prompt=[text_block("go on")], session_id=target), 60)
        sent = json.loads(log.read_text().splitlines()[-1])
        assert sent["session"] != target  # a new agent session, bound to the fork's id
        assert "<earlier-conversation>" in sent["texts"][0]
        assert PROMPTS[0] in sent["texts"][0] and PROMPTS[1] not in sent["texts"][0]
        assert sent["texts"][-1] == "go on"

        # another window regenerates the first reply: the rest is another branch now
        manager = ChatHistoryManager.open(db)
        try:
            history.append(
                manager,
                key,
                [Message(role="assistant", content="Another answer entirely.")],
                Follow(users[0].id),
            )
        finally:
            manager.close()
        active = [row.id for row in stored(db, key)]
        assert len(active) == 2 and replies[1].id not in active

        # at the second reply, on that other branch: its path, the source left as it was
        second = await fork(conn, session, cwd, str(replies[1].id))
        copied = stored(db, key_of(cwd, second["sessionId"]))
        assert [row.content for row in copied if row.role == "user"] == PROMPTS[:2]
        contents = [row.content for row in copied]
        assert replies[0].content in contents and replies[1].content in contents
        assert "Another answer entirely." not in contents
        assert [row.id for row in stored(db, key)] == active

        # a message the session does not hold, or no message id at all: -32602 naming it
        for wrong in ("no-such-message", str(rows[-1].id + 10_000), "", 7, ["x"]):
            error = await refused(conn, session, cwd, wrong)
            assert "messageId" in error
        other = (await conn.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(conn.prompt(prompt=[text_block("elsewhere")], session_id=other), 60)
        assert "messageId" in await refused(conn, other, cwd, str(replies[0].id))

        # without a messageId, the whole active path, as before
        whole = await fork(conn, session, cwd, None)
        copied = stored(db, key_of(cwd, whole["sessionId"]))
        assert [row.id for row in stored(db, key)] == active
        assert [row.content for row in copied] == [row.content for row in stored(db, key)]


async def test_a_fork_at_a_message_id_the_wire_gave(tmp_path: Path, cwd: Path) -> None:
    """The ids the editor gave its prompts and the agent its replies' chunks are kept with the
    rows: a fork names a message by them, and a load replays them."""
    db, log = tmp_path / "history.db", tmp_path / "agent.log"
    env = {"ACP_AGENT_LOG": str(log), "ACP_AGENT_MESSAGE_IDS": "1"}
    async with editor_session(db, env) as (conn, editor, _):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        for n, text in enumerate(PROMPTS, 1):
            params = {
                "sessionId": session,
                "prompt": [{"type": "text", "text": text}],
                "messageId": f"prompt-{n}",
            }
            await asyncio.wait_for(conn._conn.send_request("session/prompt", params), 60)
        reply_ids = [json.loads(line)["messageId"] for line in log.read_text().splitlines()]
        assert len(set(reply_ids)) == 3
        seen = editor.take()
        said = [u for u in seen if u["sessionUpdate"] == "agent_message_chunk"]
        assert {u["messageId"] for u in said} == set(reply_ids)

        at_reply = await fork(conn, session, cwd, reply_ids[1])
        copied = stored(db, key_of(cwd, at_reply["sessionId"]))
        assert [row.content for row in copied if row.role == "user"] == PROMPTS[:2]
        assert copied[-1].role == "tool"  # the second reply's exchange, whole

        at_prompt = await fork(conn, session, cwd, "prompt-3")
        copied = stored(db, key_of(cwd, at_prompt["sessionId"]))
        assert [row.content for row in copied if row.role == "user"] == PROMPTS
        assert copied[-1].role == "user"

        # a load from the store replays the ids; each reply's text as one chunk per message
        await asyncio.wait_for(conn.load_session(cwd=str(cwd), session_id=session), 60)
        replayed = editor.take()
        prompts = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert [u.get("messageId") for u in prompts] == ["prompt-1", "prompt-2", "prompt-3"]
        chunks = [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"]
        assert [u["messageId"] for u in chunks] == [i for i in reply_ids for _ in range(2)]
        assert chunks[0]["content"]["text"] == "Let me look at that."
