"""Several windows on one conversation (protocol.md "Version 3" → Several windows on one
conversation), over real processes: two servers and the CLI on one database. A rewind from a
stale view answers 1003 and changes nothing; every other process's change reaches a server's
client as ``chatHistory/changed`` (within 2 s while idle, before the next answer otherwise),
and a client's own writes never do."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.wire import Wire

from chat_history.service import watch

WORKSPACE = "file:///home/ada/project"
CHANGED = "chatHistory/changed"
CLI = [sys.executable, "-m", "chat_history.cli"]

#: Every test runs on SQLite and on PostgreSQL (the servers share one database either way).
pytestmark = pytest.mark.engines


@pytest.fixture
def windows(tmp_path: Path, databases: Databases | None) -> Iterator[tuple[Wire, Wire]]:
    """Two servers (two editor windows) on one storage folder and workspace (on PostgreSQL: on
    one database)."""
    opened: list[Wire] = []
    options: dict[str, Any] = {"workspace": WORKSPACE}
    if databases is not None:
        options["database"] = databases.url(tmp_path)
    try:
        for _ in range(2):
            wire = Wire(tmp_path)
            opened.append(wire)
            wire.initialize(configuration=False, options=options)
        yield opened[0], opened[1]
    finally:
        for wire in opened:
            with contextlib.suppress(Exception):
                wire.close()


def turn(wire: Wire, conversation: str, text: str) -> list[dict[str, Any]]:
    result = wire.call(
        "chatHistory/append",
        {
            "conversationId": conversation,
            "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": f"answer to {text}"},
            ],
        },
    )
    messages: list[dict[str, Any]] = result["messages"]
    return messages


def rows(wire: Wire, conversation: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wire.call("chatHistory/get", {"conversationId": conversation})[
        "messages"
    ]
    return found


def changed(wire: Wire, timeout: float) -> dict[str, Any]:
    """The next ``chatHistory/changed`` not seen yet by this helper."""
    seen = getattr(wire, "_changes_seen", 0)
    count = 0

    def nth(message: dict[str, Any]) -> bool:
        nonlocal count
        if message.get("method") != CHANGED:
            return False
        count += 1
        return count > seen

    found = wire.wait_for(nth, timeout)
    wire._changes_seen = seen + 1  # type: ignore[attr-defined]
    params: dict[str, Any] = found["params"]
    return params


def cli(storage: Path, *args: str, database: str | None = None) -> subprocess.CompletedProcess[str]:
    where = ["--database", database] if database is not None else ["--db", str(storage)]
    return subprocess.run(
        [*CLI, *where, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": "UTC"},
        timeout=60,
        check=True,
    )


def test_the_idle_look_comes_well_within_the_bound() -> None:
    """protocol.md: another process's change is told within 2 s of its commit while idle; the
    idle look's period leaves most of that for the look itself and the write."""
    assert watch.IDLE_SECONDS <= 1.0


def test_another_windows_turn_is_told_within_two_seconds_while_idle(
    windows: tuple[Wire, Wire],
) -> None:
    first, second = windows
    turn(first, "c", "hello")
    assert rows(second, "c")  # the second window shows the conversation
    second.drain(1.0)  # idle, and told of nothing yet
    second._changes_seen = len(second.messages_of(CHANGED))  # type: ignore[attr-defined]

    stored = turn(first, "c", "from the first window")
    committed = time.monotonic()
    # Sent by the idle look (the second window sends nothing). The protocol's 2 s is the look's
    # period and its cost (``test_the_idle_look_comes_well_within_the_bound``); end to end here
    # it is 0.5-0.7 s, and a loaded CI machine's scheduling may add seconds to a test's clock.
    told = changed(second, timeout=30.0)
    assert time.monotonic() - committed < 10.0
    assert told == {
        "workspace": WORKSPACE,
        "conversationId": "c",
        "lastId": stored[-1]["id"],
        "reason": "append",
    }


def test_a_clients_own_writes_are_never_told_to_it(windows: tuple[Wire, Wire]) -> None:
    first, second = windows
    stored = turn(first, "c", "one")
    newer = turn(first, "c", "two")
    first.call("chatHistory/updateConversation", {"conversationId": "c", "title": "Mine"})
    first.call(
        "chatHistory/truncate",
        {"conversationId": "c", "fromId": stored[1]["id"], "expectedLastId": newer[1]["id"]},
    )
    first.call("chatHistory/saveSummary", {"conversationId": "c", "summary": "s"})
    first.call("chatHistory/fork", {"conversationId": "c", "newConversationId": "d"})
    first.call("chatHistory/clear", {"conversationId": "d"})
    first.drain(2.5)  # longer than the idle bound
    assert first.messages_of(CHANGED) == []
    # A request's answer comes after the changes it found: the second window has heard by then.
    second.call("chatHistory/listConversations")
    # ...while the other window heard of each (one notification may stand for several).
    told = second.messages_of(CHANGED)
    assert (told and told[-1]["conversationId"] == "c") or told[-1]["conversationId"] == "d"
    assert {c["conversationId"] for c in told} <= {"c", "d"}


def test_a_stale_truncate_answers_1003_and_changes_nothing(windows: tuple[Wire, Wire]) -> None:
    first, second = windows
    turn(first, "c", "one")
    shown = rows(second, "c")  # the second window's view
    newer = turn(first, "c", "two")  # the first window sends a turn
    before = rows(first, "c")

    # The second window clicks Regenerate on the last reply it shows.
    error = second.error(
        "chatHistory/truncate",
        {"conversationId": "c", "fromId": shown[-1]["id"], "expectedLastId": shown[-1]["id"]},
    )
    assert error["code"] == 1003
    assert error["data"] == {"lastId": newer[-1]["id"]}
    assert rows(first, "c") == before  # nothing deleted

    for method, params in (
        ("chatHistory/deleteTurns", {"turns": [1]}),
        ("chatHistory/editMessage", {"id": shown[0]["id"], "content": "edited"}),
    ):
        error = second.error(
            method, {"conversationId": "c", "expectedLastId": shown[-1]["id"], **params}
        )
        assert error["code"] == 1003 and error["data"] == {"lastId": newer[-1]["id"]}
    assert rows(first, "c") == before

    # An empty view (null) is stale too once rows exist; the current id is not.
    error = second.error(
        "chatHistory/deleteTurns", {"conversationId": "c", "turns": [1], "expectedLastId": None}
    )
    assert error["code"] == 1003
    done = second.call(
        "chatHistory/truncate",
        {"conversationId": "c", "fromId": newer[1]["id"], "expectedLastId": newer[1]["id"]},
    )
    assert done["deletedMessages"] == 1


def test_expected_last_id_must_be_a_row_id_or_null(windows: tuple[Wire, Wire]) -> None:
    first, _ = windows
    stored = turn(first, "c", "one")
    for bad in ("7", -1, True, 1.5):
        error = first.error(
            "chatHistory/truncate",
            {"conversationId": "c", "fromId": stored[0]["id"], "expectedLastId": bad},
        )
        assert error["code"] == -32602 and error["data"]["field"] == "expectedLastId", error


def test_a_change_is_told_before_the_answer_to_the_next_request(
    windows: tuple[Wire, Wire],
) -> None:
    first, second = windows
    turn(first, "c", "one")
    rows(second, "c")
    second.drain(1.0)
    second._changes_seen = len(second.messages_of(CHANGED))  # type: ignore[attr-defined]
    newer = turn(first, "c", "two")
    answer_id = second.request("chatHistory/get", {"conversationId": "c"})
    answer = second.answer_to(answer_id)
    told = second.wait_for(
        lambda m: m.get("method") == CHANGED and m["params"]["lastId"] == newer[-1]["id"], 0.1
    )
    assert second.received.index(told) < second.received.index(answer)


def test_the_cli_and_two_servers_racing_lose_nothing_and_tell_each_other(
    windows: tuple[Wire, Wire], tmp_path: Path, databases: Databases | None
) -> None:
    first, second = windows
    url = databases.url(tmp_path) if databases is not None else None
    turn(first, "c", "start")
    rows(second, "c")
    first.drain(1.0)
    second.drain(0.1)
    seen = {id(w): len(w.messages_of(CHANGED)) for w in windows}

    # Both windows send turns without waiting while the CLI renames and imports.
    sent = []
    for n in range(10):
        for wire in windows:
            sent.append(
                (
                    wire,
                    wire.request(
                        "chatHistory/append",
                        {
                            "conversationId": "c",
                            "messages": [{"role": "user", "content": f"{id(wire)} {n}"}],
                        },
                    ),
                )
            )
        if n == 5:
            cli(
                tmp_path,
                "rename",
                "c",
                "Renamed by the CLI",
                "--workspace",
                WORKSPACE,
                database=url,
            )
    for wire, request_id in sent:
        assert "error" not in wire.answer_to(request_id)
    final = rows(first, "c")
    assert len(final) == 2 + 20  # nothing lost or doubled
    assert len({r["content"] for r in final}) == 22

    for wire in windows:
        wire.drain(2.5)
        told = wire.messages_of(CHANGED)[seen[id(wire)] :]
        assert told, "the other window's and the CLI's changes were told"
        assert {c["reason"] for c in told} <= {"append", "title"}
        # The newest told lastId is the conversation's newest row at that moment, never an id
        # of a row this window wrote last (its own writes are not told).
        assert all(c["conversationId"] == "c" for c in told)

    # The CLI's truncate reaches both windows as a deletion, with the id left.
    for wire in windows:  # counted before: the notification may come before the CLI returns
        wire._changes_seen = len(wire.messages_of(CHANGED))  # type: ignore[attr-defined]
    cli(
        tmp_path,
        "truncate",
        "c",
        "--from",
        str(final[2]["id"]),
        "--workspace",
        WORKSPACE,
        database=url,
    )
    for wire in windows:
        told = changed(wire, timeout=30.0)  # the 2 s bound: the test above
        assert told["reason"] == "delete" and told["lastId"] == final[1]["id"]


def test_fork_through_a_call_row_copies_its_answers(windows: tuple[Wire, Wire]) -> None:
    first, _ = windows
    stored = first.call(
        "chatHistory/append",
        {
            "conversationId": "c",
            "messages": [
                {"role": "user", "content": "read two files"},
                {
                    "role": "assistant",
                    "content": "",
                    "toolCalls": [
                        {"id": "a", "name": "read_file", "arguments": {"path": "a"}},
                        {"id": "b", "name": "read_file", "arguments": {"path": "b"}},
                    ],
                },
                {"role": "tool", "toolCallId": "a", "name": "read_file", "content": "A"},
                {"role": "tool", "toolCallId": "b", "name": "read_file", "content": "B"},
                {"role": "assistant", "content": "both read"},
            ],
        },
    )["messages"]
    call_row, first_answer = stored[1]["id"], stored[2]["id"]
    for through, name in ((call_row, "from-call"), (first_answer, "from-answer")):
        first.call(
            "chatHistory/fork",
            {"conversationId": "c", "newConversationId": name, "throughId": through},
        )
        copy = rows(first, name)
        assert [r["role"] for r in copy] == ["user", "assistant", "tool", "tool"]
        assert [r["toolCallId"] for r in copy[2:]] == ["a", "b"]
    first.call(
        "chatHistory/fork",
        {"conversationId": "c", "newConversationId": "user-only", "throughId": stored[0]["id"]},
    )
    assert [r["role"] for r in rows(first, "user-only")] == ["user"]
