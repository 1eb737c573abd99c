"""``chat-history acp`` when things go wrong (issue 33, "Faults"): the agent crashes mid-reply,
writes garbage or a 100 MB line, answers out of order; the editor leaves mid-reply; two editors
share one database. Nothing is lost or doubled, and nobody waits forever."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from acp import RequestError, text_block
from tests.e2e.acp_peers.client import editor_session

from chat_history.model import Key
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import resolve

RAW = [sys.executable, "-m", "tests.e2e.acp_peers.raw_agent"]


def rows_of(db: Path, cwd: Path, session: str) -> list[tuple[str, str, str]]:
    manager = ChatHistoryManager.open(db)
    try:
        key = Key(resolve(cwd.as_uri(), "folder").workspace, f"acp:{session}")
        rows, _ = history.whole(manager, key)
        return [(r.role, r.content, r.status) for r in rows]
    finally:
        manager.close()


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


async def test_agent_crash_mid_reply(tmp_path: Path, cwd: Path) -> None:
    db = tmp_path / "h.db"
    async with editor_session(db, {}) as (conn, _, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        with pytest.raises(RequestError):
            await asyncio.wait_for(
                conn.prompt(prompt=[text_block("crash now")], session_id=session), 60
            )
        assert rows_of(db, cwd, session) == [
            ("user", "crash now", "complete"),
            ("assistant", "Let me ", "interrupted"),
        ]
        # the next prompt starts the agent again and carries the session on
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("again")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
    assert [r[0] for r in rows_of(db, cwd, session)] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]


async def test_garbage_lines_are_dropped(tmp_path: Path, cwd: Path) -> None:
    db = tmp_path / "h.db"
    async with editor_session(db, {"ACP_RAW_MODE": "garbage"}, RAW) as (conn, editor, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("hi")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
        assert [u["content"]["text"] for u in editor.take()] == ["answer to hi"]
    assert rows_of(db, cwd, session) == [
        ("user", "hi", "complete"),
        ("assistant", "answer to hi", "complete"),
    ]


async def test_a_100_mb_line_passes(tmp_path: Path, cwd: Path) -> None:
    db, size = tmp_path / "h.db", 100 * 1024 * 1024
    env = {"ACP_RAW_MODE": "huge", "ACP_RAW_HUGE": str(size)}
    async with editor_session(db, env, RAW) as (conn, editor, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("big")], session_id=session), 120
        )
        assert answer.stop_reason == "end_turn"
        texts = [u["content"]["text"] for u in editor.take()]
        assert len(texts) == 2 and len(texts[0]) == size and texts[1] == "answer to big"
    # the over-long line passed unparsed: the row holds what the proxy could read
    assert rows_of(db, cwd, session)[1] == ("assistant", "answer to big", "complete")


async def test_answers_out_of_order(tmp_path: Path, cwd: Path) -> None:
    db = tmp_path / "h.db"
    async with editor_session(db, {"ACP_RAW_MODE": "reorder"}, RAW) as (conn, _, _p):
        one = (await conn.new_session(cwd=str(cwd))).session_id
        two = (await conn.new_session(cwd=str(cwd))).session_id
        answers = await asyncio.wait_for(
            asyncio.gather(
                conn.prompt(prompt=[text_block("first")], session_id=one),
                conn.prompt(prompt=[text_block("second")], session_id=two),
            ),
            60,
        )
        assert [a.stop_reason for a in answers] == ["end_turn", "end_turn"]
    assert rows_of(db, cwd, one)[1] == ("assistant", "answer to first", "complete")
    assert rows_of(db, cwd, two)[1] == ("assistant", "answer to second", "complete")


async def test_editor_leaves_mid_reply(tmp_path: Path, cwd: Path) -> None:
    db, pid = tmp_path / "h.db", tmp_path / "agent.pid"
    async with editor_session(db, {"ACP_AGENT_PID": str(pid)}) as (conn, _, process):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(prompt=[text_block("slow one")], session_id=session)
        )
        await asyncio.sleep(0.5)
        assert process.stdin is not None
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 15) == 0
        turn.cancel()  # the editor is gone: nobody reads its answer
    role, text, status = rows_of(db, cwd, session)[1]
    assert (role, status) == ("assistant", "interrupted") and text.startswith("Let me")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)


async def test_two_editors_on_one_database(tmp_path: Path, cwd: Path) -> None:
    db = tmp_path / "h.db"

    async def one_editor(name: str) -> str:
        async with editor_session(db, {}) as (conn, _, _p):
            session = (await conn.new_session(cwd=str(cwd))).session_id
            for n in range(3):
                await asyncio.wait_for(
                    conn.prompt(prompt=[text_block(f"{name} {n}")], session_id=session), 30
                )
            return session

    sessions = await asyncio.gather(one_editor("a"), one_editor("b"))
    for name, session in zip("ab", sessions, strict=True):
        rows = rows_of(db, cwd, session)
        assert [r[1] for r in rows if r[0] == "user"] == [f"{name} {n}" for n in range(3)]
        assert [r[0] for r in rows] == ["user", "assistant", "tool"] * 3
        assert all(r[2] == "complete" for r in rows)


async def test_ids_kept_apart(tmp_path: Path, cwd: Path) -> None:
    """An editor id in the proxy's own id space is renamed on the way and put back, while the
    proxy's own requests (a served load's session/new) are under way."""
    import json

    from tests.e2e.acp_peers.client import ROOT, proxy_command

    process = await asyncio.create_subprocess_exec(
        *proxy_command(tmp_path / "h.db", RAW),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACP_RAW_MODE": "stream",
             "ACP_RAW_UPDATES": "0", "ACP_RAW_RATE": "1"},
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None

    async def send(rid: object, method: str, params: dict[str, object]) -> None:
        line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        process.stdin.write(json.dumps(line).encode() + b"\n")  # type: ignore[union-attr]
        await process.stdin.drain()  # type: ignore[union-attr]

    async def answers(count: int) -> dict[object, dict[str, object]]:
        got: dict[object, dict[str, object]] = {}
        while len(got) < count:
            line = await asyncio.wait_for(process.stdout.readline(), 60)  # type: ignore[union-attr]
            message = json.loads(line)
            if "method" not in message:
                got[message["id"]] = message
        return got

    await send(1, "initialize", {"protocolVersion": 1})
    await send(2, "session/new", {"cwd": str(cwd), "mcpServers": []})
    first = await answers(2)
    session = first[2]["result"]["sessionId"]  # type: ignore[index]
    await send(
        3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}
    )
    await answers(1)
    # without the renaming, the agent's answer to /1 would be taken for the load's session/new
    await send("chat-history-acp/1", "session/set_mode", {"sessionId": session, "modeId": "m"})
    await send("chat-history-acp/2", "session/load", {"sessionId": session, "cwd": str(cwd)})
    await send("chat-history-acp/3", "session/set_mode", {"sessionId": session, "modeId": "m"})
    got = await answers(3)
    assert set(got) == {"chat-history-acp/1", "chat-history-acp/2", "chat-history-acp/3"}
    assert all("result" in a for a in got.values())
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 15) == 0


async def test_permission_requests_and_cancel_pass_through(tmp_path: Path, cwd: Path) -> None:
    """The agent's request to the editor and the editor's answer pass with their ids, on a
    session bound to a new agent session (its session id rebound both ways)."""
    import json

    db, log = tmp_path / "h.db", tmp_path / "agent.log"
    async with editor_session(db, {"ACP_AGENT_LOG": str(log)}) as (conn, editor, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(conn.prompt(prompt=[text_block("one")], session_id=session), 60)
        await conn.resume_session(session_id=session, cwd=str(cwd))  # a new agent session
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("permission please")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
        await conn.cancel(session_id=session)  # a notification: passes, nothing answers it
        assert all(s == session for s, _ in editor.updates)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"permission": {"outcome": "selected", "option_id": "yes"}} in lines
    assert lines[1]["session"] != session  # the prompt reached the new agent session
    assert {"cancel": lines[1]["session"]} in lines  # the cancel too, under its id


async def test_an_agent_that_cannot_start(tmp_path: Path) -> None:
    """Each request gets an error, not a hang; the proxy exits when the editor leaves."""
    from acp import PROTOCOL_VERSION, connect_to_agent
    from tests.e2e.acp_peers.client import ROOT, Editor, proxy_command

    process = await asyncio.create_subprocess_exec(
        *proxy_command(tmp_path / "h.db", [str(tmp_path / "no-such-agent")]),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdin is not None and process.stdout is not None
    conn = connect_to_agent(Editor(), process.stdin, process.stdout)
    for _ in range(2):
        with pytest.raises(RequestError):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
    await conn.close()
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 15) == 0


async def test_a_malformed_answer_to_the_proxy_is_an_error_not_a_hang(
    tmp_path: Path, cwd: Path
) -> None:
    """The agent answers the served load's session/new without a session id."""
    async with editor_session(tmp_path / "h.db", {"ACP_RAW_MODE": "badnew"}, RAW) as (conn, _, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(conn.prompt(prompt=[text_block("hi")], session_id=session), 60)
        with pytest.raises(RequestError):
            await asyncio.wait_for(conn.load_session(cwd=str(cwd), session_id=session), 60)
        # the proxy goes on: the session's prompts still pass
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("still there")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"


async def test_an_agent_that_cannot_load_its_own_session(tmp_path: Path, cwd: Path) -> None:
    """It declares loadSession but answers -32002: the proxy replays the store instead."""
    db = tmp_path / "h.db"
    async with editor_session(db, {"ACP_RAW_MODE": "forgetful"}, RAW) as (conn, editor, _p):
        session = (await conn.new_session(cwd=str(cwd))).session_id
        await asyncio.wait_for(conn.prompt(prompt=[text_block("hi")], session_id=session), 60)
        editor.take()
        await asyncio.wait_for(conn.load_session(cwd=str(cwd), session_id=session), 60)
        assert [u["content"]["text"] for u in editor.take()] == ["hi", "answer to hi"]
        answer = await asyncio.wait_for(
            conn.prompt(prompt=[text_block("more")], session_id=session), 60
        )
        assert answer.stop_reason == "end_turn"
        assert all(s == session for s, _ in editor.updates)
        with pytest.raises(RequestError):  # a session neither knows
            await conn.load_session(cwd=str(cwd), session_id="nobody")
    assert [r[1] for r in rows_of(db, cwd, session) if r[0] == "user"] == ["hi", "more"]


INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def test_stdio_that_are_files(tmp_path: Path) -> None:
    """Stdout a regular file (``… > answers``): the answers are written there; stdin a regular
    file (``… < requests``): its end is the editor's, and the proxy stops cleanly. Before, the
    event loop refused both with a traceback ("Pipe transport is only for pipes, sockets and
    character devices") and a coroutine was left never awaited."""
    import subprocess
    import time

    from tests.e2e.acp_peers.client import proxy_command

    command = proxy_command(tmp_path / "history.db")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    answers, errors = tmp_path / "answers", tmp_path / "errors"
    with answers.open("wb") as out, errors.open("wb") as err:
        proxy = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env)
        assert proxy.stdin is not None
        proxy.stdin.write(INIT)
        proxy.stdin.flush()
        for _ in range(600):
            if b'"id":1' in answers.read_bytes():
                break
            time.sleep(0.05)
        proxy.stdin.close()
        assert proxy.wait(30) == 0
    assert b'"agentCapabilities"' in answers.read_bytes()
    assert b"Traceback" not in errors.read_bytes()

    requests = tmp_path / "requests"
    requests.write_bytes(INIT)
    with requests.open("rb") as source:
        done = subprocess.run(command, stdin=source, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr and b"never awaited" not in done.stderr
