"""kill -9 in the middle of appends: every append the server answered survives, every append is
whole or absent, the database passes ``PRAGMA integrity_check``, and a restarted server serves
the conversation."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.reliability import (
    KEEP_ALL,
    SUFFIXES,
    Server,
    assistant,
    database_path,
    frame,
    request_body,
    start,
    user,
)

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

APPENDS = 1_000


def _append_params(n: int) -> dict[str, Any]:
    # Two rows per append, so a torn append would show as a prompt without its reply.
    return {"conversationId": "c", "messages": [user(f"q{n:04d}"), assistant(f"a{n:04d}")]}


def _kill_when(server: Server, answered: list[int], count: int, done: threading.Event) -> None:
    while len(answered) < count and not done.is_set():
        done.wait(0.001)
    server.process.kill()
    # Reaped here: its pipes close a moment before it can be waited for, and a close() in that
    # moment would still try a polite shutdown.
    server.process.wait(10)


def _integrity(folder: Path, scratch: Path) -> str:
    """integrity_check of a copy of the files the killed server left (the original stays as it
    was for the restarted server to recover)."""
    scratch.mkdir()
    for suffix in SUFFIXES:
        source = Path(f"{database_path(folder)}{suffix}")
        if source.exists():
            shutil.copyfile(source, Path(f"{database_path(scratch)}{suffix}"))
    connection = sqlite3.connect(database_path(scratch))
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


def _check_restart(storage: Path, log: Path, answered: list[int], sent: int) -> list[int]:
    """Restart on the same folder: the history holds every answered append, whole, in order."""
    server = start(storage, KEEP_ALL, log=log)
    try:
        rows = server.get("c")
        prompts = [r["content"] for r in rows[::2]]
        replies = [r["content"] for r in rows[1::2]]
        assert len(rows) % 2 == 0
        assert [p.replace("q", "a", 1) for p in prompts] == replies  # no torn append
        kept = [int(p[1:]) for p in prompts]
        assert kept == sorted(set(kept))  # in order, no duplicate
        assert set(answered) <= set(kept)  # nothing answered was lost
        assert set(kept) <= set(range(sent))  # nothing invented
        # and the restarted server writes again
        server.append("c", user("after the crash"))
        assert server.get("c")[-1]["content"] == "after the crash"
        print(f"\nsent {sent}, answered {len(answered)}, kept {len(kept)} (all answered kept)")
        return kept
    finally:
        server.close()


@pytest.mark.parametrize("kill_after", [250, 600])
def test_kill_9_between_appends_answered_one_by_one_loses_nothing(
    tmp_path: Path, kill_after: int, engine: str
) -> None:
    storage = tmp_path / "store"
    server = start(storage, KEEP_ALL, log=tmp_path / "first.log")
    answered: list[int] = []
    done = threading.Event()
    killer = threading.Thread(target=_kill_when, args=(server, answered, kill_after, done))
    killer.start()
    sent = 0
    try:
        for n in range(APPENDS):
            sent = n + 1
            answer = server.call_raw("chatHistory/append", _append_params(n))
            assert "result" in answer, answer
            answered.append(n)
    except (EOFError, OSError, ValueError):
        pass  # killed
    finally:
        done.set()
        killer.join(10)
        server.close()
    assert server.process.returncode == -9
    assert kill_after <= len(answered) < APPENDS

    if engine == "sqlite":  # the files a killed process left (PostgreSQL keeps its own)
        assert _integrity(storage, tmp_path / "copy") == "ok"
    kept = _check_restart(storage, tmp_path / "second.log", answered, sent)
    assert len(kept) >= len(answered)


def test_kill_9_with_appends_in_flight_keeps_every_answered_one(
    tmp_path: Path, engine: str
) -> None:
    """All 1,000 appends written at once (many in flight when the kill lands): the answered ones
    all survive; the unanswered ones are each whole or absent."""
    storage = tmp_path / "store"
    server = start(storage, KEEP_ALL, log=tmp_path / "first.log")
    first_id = server._next_id + 1
    payload = b"".join(
        frame(request_body(first_id + n, "chatHistory/append", _append_params(n)))
        for n in range(APPENDS)
    )
    answered: list[int] = []
    done = threading.Event()

    def read_answers() -> None:
        try:
            while True:
                message = server.receive()
                if "result" in message:
                    answered.append(int(message["id"]) - first_id)
        except (EOFError, OSError, ValueError):
            done.set()

    reader = threading.Thread(target=read_answers)
    reader.start()
    killer = threading.Thread(target=_kill_when, args=(server, answered, 400, done))
    killer.start()
    assert server.process.stdin is not None
    stdin = server.process.stdin.fileno()  # unbuffered: nothing left to flush after the kill
    with contextlib.suppress(OSError):  # killed while writing
        view = memoryview(payload)
        while view:
            view = view[os.write(stdin, view) :]
    killer.join(60)
    reader.join(60)
    server.close()
    assert server.process.returncode == -9
    assert 400 <= len(answered) < APPENDS

    if engine == "sqlite":  # the files a killed process left (PostgreSQL keeps its own)
        assert _integrity(storage, tmp_path / "copy") == "ok"
    _check_restart(storage, tmp_path / "second.log", answered, APPENDS)
