"""``chat-history acp`` when things go wrong (issue 33, "Faults"): the agent crashes mid-reply,
writes garbage or a 100 MB line, answers out of order; the editor leaves mid-reply; two editors
share one database. Nothing is lost or doubled, and nobody waits forever."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

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
        # The editor leaves once the reply is seen streaming (a fixed wait could be too short
        # for three processes on a loaded machine).
        for _ in range(600):
            found = rows_of(db, cwd, session)
            if len(found) == 2 and found[1][2] == "streaming" and found[1][1]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the reply was never seen streaming")
        assert process.stdin is not None
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 15) == 0
        turn.cancel()  # the editor is gone: nobody reads its answer
    role, text, status = rows_of(db, cwd, session)[1]
    assert (role, status) == ("assistant", "interrupted") and text.startswith("Let me")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX's")
async def test_what_the_agent_started_stops_with_the_proxy(tmp_path: Path, cwd: Path) -> None:
    """An agent behind a wrapper (``npx`` starting codex-acp's binary) leaves a process the
    proxy did not start itself: it stops with the agent's process group when the editor
    leaves."""
    db, pid, child = tmp_path / "h.db", tmp_path / "agent.pid", tmp_path / "child.pid"
    env = {"ACP_AGENT_PID": str(pid), "ACP_AGENT_CHILD": str(child)}
    async with editor_session(db, env) as (conn, _, process):
        await conn.new_session(cwd=str(cwd))  # the agent runs, and its child
        started = int(child.read_text())
        assert running(started)
        assert process.stdin is not None
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 15) == 0
    assert not running(int(pid.read_text()))
    for _ in range(100):  # a kill is delivered at once; its reaping may come a moment later
        if not running(started):
            break
        await asyncio.sleep(0.05)
    assert not running(started)


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

    from tests.e2e.acp_peers.client import start_proxy

    raw = {"ACP_RAW_MODE": "stream", "ACP_RAW_UPDATES": "0", "ACP_RAW_RATE": "1"}
    process = await start_proxy(tmp_path / "h.db", RAW, env=raw)
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
    from tests.e2e.acp_peers.client import Editor, start_proxy

    process = await start_proxy(tmp_path / "h.db", [str(tmp_path / "no-such-agent")])
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


async def test_hostile_history_requests(tmp_path: Path, cwd: Path) -> None:
    """``session/list``, ``archive`` and ``set_title`` given what no editor should send: each is
    -32602 naming its field (and echoing nothing of it) within a second or so, a huge ``limit``
    is clamped to 1,000 rows, a cursor works in the list of its own folder only, and no folder
    lists another's sessions, even one whose path starts with its own. The proxy goes on."""
    import time

    from chat_history.model import Message

    other = cwd.parent / (cwd.name + "-two")  # its path starts with the project's
    other.mkdir()
    db = tmp_path / "h.db"
    manager = ChatHistoryManager.open(db)
    try:
        for i in range(1_200):
            key = Key(resolve(cwd.as_uri(), "folder").workspace, f"acp:s{i:04}")
            history.append(manager, key, [Message(role="user", content=f"ask {i}")])
        for i in range(3):
            key = Key(resolve(other.as_uri(), "folder").workspace, f"acp:o{i}")
            history.append(manager, key, [Message(role="user", content="theirs")])
    finally:
        manager.close()
    mine, theirs = str(cwd), str(other)
    async with editor_session(db, {}) as (conn, _, _p):
        send = conn._conn.send_request
        their_cursor = (await send("session/list", {"cwd": theirs, "limit": 1}))["nextCursor"]
        my_cursor = (await send("session/list", {"cwd": mine, "limit": 1}))["nextCursor"]
        forged = my_cursor[:-4] + ("AAAA" if not my_cursor.endswith("AAAA") else "BBBB")
        bad: list[tuple[str, dict[str, object], str]] = [
            ("session/list", {"cwd": mine, "cursor": "garbage"}, "cursor"),
            ("session/list", {"cwd": mine, "cursor": 5}, "cursor"),
            ("session/list", {"cwd": mine, "cursor": "c2." + "A" * 1_000_000}, "cursor"),
            ("session/list", {"cwd": mine, "cursor": forged}, "cursor"),
            ("session/list", {"cwd": mine, "cursor": their_cursor}, "cursor"),
            ("session/list", {"cwd": mine, "limit": 0}, "limit"),
            ("session/list", {"cwd": mine, "limit": -3}, "limit"),
            ("session/list", {"cwd": mine, "limit": 2.5}, "limit"),
            ("session/list", {"cwd": mine, "limit": "50"}, "limit"),
            ("session/list", {"cwd": mine, "limit": True}, "limit"),
            ("session/list", {"cwd": 5}, "cwd"),
            ("session/list", {"cwd": ""}, "cwd"),
            ("session/list", {"cwd": "relative/folder"}, "cwd"),
            ("session/list", {"cwd": "/" + "a" * 5_000}, "cwd"),
            ("session/list", {"cwd": mine + "\0"}, "cwd"),
            ("session/list", {"cwd": [mine]}, "cwd"),
            ("session/list", {"cwd": mine, "archived": "yes"}, "archived"),
            ("session/list", {"cwd": mine, "includeWorktrees": 1}, "includeWorktrees"),
            ("session/list", {"_meta": {"chatHistory": {"source": "agent"}}}, "_meta"),
            ("session/archive", {"sessionId": 5}, "sessionId"),
            ("session/unarchive", {}, "sessionId"),
            ("session/set_title", {"sessionId": "acp-x", "title": 5}, "title"),
            ("session/set_title", {"sessionId": [], "title": "x"}, "sessionId"),
        ]
        for method, params, field in bad:
            began = time.monotonic()
            with pytest.raises(RequestError) as refused:
                await asyncio.wait_for(send(method, params), 30)
            assert time.monotonic() - began < 5, (method, field)
            assert refused.value.code == -32602, (method, field)
            message = str(refused.value)
            assert field in message and len(message) < 300, (method, field, message[:300])

        began = time.monotonic()
        huge = await send("session/list", {"cwd": mine, "limit": 10**30})
        assert len(huge["sessions"]) == 1_000 and huge["nextCursor"]
        assert time.monotonic() - began < 10
        rest = await send(
            "session/list", {"cwd": mine, "limit": 10**9, "cursor": huge["nextCursor"]}
        )
        assert len(rest["sessions"]) == 200 and "nextCursor" not in rest
        listed = {r["sessionId"] for r in huge["sessions"] + rest["sessions"]}
        assert listed == {f"s{i:04}" for i in range(1_200)}  # nothing of the other folder's
        assert {r["cwd"] for r in huge["sessions"] + rest["sessions"]} == {mine}
        their_rows = (await send("session/list", {"cwd": theirs}))["sessions"]
        assert {r["sessionId"] for r in their_rows} == {"o0", "o1", "o2"}
        for untitled in ("", " ", "x" * 201):  # a session that exists: the title is refused
            with pytest.raises(RequestError) as refused:
                await send("session/set_title", {"sessionId": "s0001", "title": untitled})
            assert refused.value.code == -32602 and "title" in str(refused.value)
        # it goes on: the first page as before
        again = await send("session/list", {"cwd": mine, "limit": 1})
        assert again["sessions"][0]["sessionId"] == huge["sessions"][0]["sessionId"]


async def test_answers_with_ids_no_request_has(tmp_path: Path, cwd: Path) -> None:
    """While the agent waits on a permission (its session ``requires_action``), the editor's
    answers whose ids are an array or an object (no request has such an id) pass on to the
    agent as they came, without tripping the proxy (the SDK's agent dies of them: the prompt
    gets an answer all the same), which goes on answering; the question is gone with them."""
    import json

    from tests.e2e.acp_peers.client import start_proxy

    process = await start_proxy(tmp_path / "h.db")
    assert process.stdin is not None and process.stdout is not None

    async def send(line: dict[str, object]) -> None:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **line}).encode() + b"\n")  # type: ignore[union-attr]
        await process.stdin.drain()  # type: ignore[union-attr]

    async def until(check: object) -> dict[str, Any]:
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), 60)  # type: ignore[union-attr]
            message: dict[str, Any] = json.loads(line)
            if check(message):  # type: ignore[operator]
                return message

    await send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    await until(lambda m: m.get("id") == 1)
    await send({"id": 2, "method": "session/new", "params": {"cwd": str(cwd), "mcpServers": []}})
    session = (await until(lambda m: m.get("id") == 2))["result"]["sessionId"]
    prompt = [{"type": "text", "text": "permission please"}]
    await send(
        {"id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": prompt}}
    )
    asked = await until(lambda m: m.get("method") == "session/request_permission")
    await send({"id": 4, "method": "session/list", "params": {"cwd": str(cwd)}})
    listed = await until(lambda m: m.get("id") == 4)
    assert [r["state"] for r in listed["result"]["sessions"]] == ["requires_action"]
    await send({"id": [1], "result": {}})
    await send({"id": {"a": 1}, "error": {"code": 1, "message": "x"}})
    outcome = {"outcome": {"outcome": "selected", "optionId": "yes"}}
    await send({"id": asked["id"], "result": outcome})
    done = await until(lambda m: m.get("id") == 3)
    assert done.get("result", {}).get("stopReason") == "end_turn" or "error" in done
    await send({"id": 5, "method": "session/list", "params": {"cwd": str(cwd)}})
    listed = await until(lambda m: m.get("id") == 5)
    assert [r["state"] for r in listed["result"]["sessions"]] == ["idle"]
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 15) == 0
