"""Replies in flight, the writer's lease and other windows (protocol.md "Version 4"), over real
server processes on both engines: a SIGKILLed server's reply interrupted for another reader
(with a short lease, and once with the real default within 30 s), a clean exit interrupting at
once, and ``chatHistory/changed`` reason ``"reply"`` at most twice a second."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.e2e.replies_helpers import (
    CHANGED,
    ask,
    begin,
    end,
    open_window,
    row_of,
    rows,
    status_of,
    update,
    wait_until,
)
from tests.e2e.wire import Wire

__all__ = ["open_window"]  # the fixture, imported for pytest
pytestmark = pytest.mark.engines


# -- the lease -----------------------------------------------------------------------------------


def test_a_killed_servers_reply_is_interrupted_for_every_reader(
    open_window: Callable[..., Wire],
) -> None:
    writer, reader = open_window(), open_window()
    ask(writer)
    row = begin(writer, message={"content": "what the user saw"})
    update(writer, row["id"], contentDelta=" before the crash")
    assert row_of(reader, row["id"]) == ("streaming", "what the user saw before the crash")
    writer.process.send_signal(signal.SIGKILL)
    writer.finish()

    waited = wait_until(lambda: status_of(reader, row["id"]) == "interrupted", 15)

    assert waited < 10  # the lease here is 1.2 s (the default's bound: the test below)
    assert row_of(reader, row["id"]) == ("interrupted", "what the user saw before the crash")
    # The reader may continue it now.
    assert begin(reader, continueId=row["id"])["status"] == "streaming"


@pytest.mark.sqlite_only
def test_the_default_lease_interrupts_a_killed_servers_reply_within_30_seconds(
    open_window: Callable[..., Wire],
) -> None:
    assert "CHAT_HISTORY_REPLY_LEASE_MS" not in os.environ  # the real default in both
    first, second = open_window(short_lease=False), open_window(short_lease=False)
    row = begin(first, message={"content": "long answer"})
    first.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first.finish()
    wait_until(lambda: status_of(second, row["id"]) == "interrupted", 40)
    assert time.monotonic() - killed <= 30
    assert row_of(second, row["id"]) == ("interrupted", "long answer")


@pytest.mark.parametrize("how", ["shutdown", "pipe", "sigterm"])
def test_a_clean_exit_interrupts_its_reply_at_once(
    open_window: Callable[..., Wire], how: str
) -> None:
    writer, reader = open_window(env={"CHAT_HISTORY_REPLY_LEASE_MS": "600000"}), open_window()
    row = begin(writer, message={"content": "cut"})
    if how == "shutdown":
        writer.close()
    elif how == "pipe":
        assert writer.process.stdin is not None
        writer.process.stdin.close()
        writer.finish()
    else:
        writer.process.send_signal(signal.SIGTERM)
        writer.finish()
    # At once: the lease (10 minutes here) never had to expire.
    assert row_of(reader, row["id"]) == ("interrupted", "cut")


# -- other windows -------------------------------------------------------------------------------


def test_other_windows_are_told_of_a_growing_reply_at_most_twice_a_second(
    open_window: Callable[..., Wire],
) -> None:
    writer, watcher = open_window(), open_window()
    ask(writer)
    rows(watcher)
    watcher.drain(1.0)
    row = begin(writer)
    started = time.monotonic()
    while time.monotonic() - started < 3.0:
        update(writer, row["id"], contentDelta="tok ")
        rows(watcher)  # the watcher looks before every answer: 20 looks a second
        time.sleep(0.03)
    end(writer, row["id"], "complete")
    watcher.drain(1.5)
    seconds = time.monotonic() - started
    reasons = [m["reason"] for m in watcher.messages_of(CHANGED) if m["conversationId"] == "c"]
    assert reasons[0] == "append"  # the streaming row appeared
    assert reasons.count("reply") >= 4, reasons  # it grew, and it ended
    assert reasons.count("reply") <= 2 * seconds + 1, reasons
    assert writer.messages_of(CHANGED) == []


def told_reply(wire: Wire, since: int) -> list[dict[str, Any]]:
    """The ``chatHistory/changed`` "reply" notifications of "c" from the ``since``-th on."""
    return [
        m
        for m in wire.messages_of(CHANGED)[since:]
        if m["conversationId"] == "c" and m["reason"] == "reply"
    ]


@pytest.mark.parametrize("windows", [2, 3])
def test_every_window_hears_of_an_expired_lease_the_one_that_ended_it_too(
    open_window: Callable[..., Wire], windows: int
) -> None:
    """Issue 43 item 3: the server that interrupts an expired reply tells its own client (the
    others hear of it through the change watch). With two windows the survivor is the one that
    ends it; with three, whichever ends it, both are told."""
    writer = open_window()
    watchers = [open_window() for _ in range(windows - 1)]
    ask(writer)
    row = begin(writer, message={"content": "seen"})
    update(writer, row["id"], contentDelta=" so far")
    for watcher in watchers:
        rows(watcher)  # each has seen the streaming row
        watcher.drain(1.0)
    seen = [len(w.messages_of(CHANGED)) for w in watchers]
    writer.process.send_signal(signal.SIGKILL)
    writer.finish()

    for watcher, since in zip(watchers, seen, strict=True):
        # idle: its own look (at most 2 s after the commit) tells it
        wait_until(lambda w=watcher, s=since: bool(told_reply(w, s)), 15)
        assert told_reply(watcher, since)[-1]["lastId"] == row["id"]
        assert row_of(watcher, row["id"]) == ("interrupted", "seen so far")


@pytest.mark.sqlite_only
def test_the_cli_interrupts_a_killed_servers_reply_too(open_window: Callable[..., Wire]) -> None:
    import subprocess
    import sys

    from chat_history.store.engine import sqlite3
    from chat_history.store.schema import DATABASE_FILE

    writer = open_window()
    row = begin(writer, message={"content": "seen"})
    writer.process.send_signal(signal.SIGKILL)
    writer.finish()
    database = writer.storage / DATABASE_FILE

    def stored_status() -> str:
        connection = sqlite3.connect(str(database))
        try:
            found = connection.execute(
                "SELECT status FROM messages WHERE id = ?", (row["id"],)
            ).fetchone()
        finally:
            connection.close()
        return str(found[0])

    assert stored_status() == "streaming"
    time.sleep(1.5)  # past the 1.2 s lease these tests run with
    subprocess.run(
        [sys.executable, "-m", "chat_history.cli", "--db", str(writer.storage), "stats"],
        env={**os.environ, "CHAT_HISTORY_REPLY_LEASE_MS": "1200"},
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert stored_status() == "interrupted"
