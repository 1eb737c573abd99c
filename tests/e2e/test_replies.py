"""Replies in flight (protocol.md "Version 4" → Replies in flight) over real server processes on
both engines: a reply stored while it streams, read as it stands, found by search once it ended,
continued, discarded without residue; one streaming row per conversation (1004); the lease (a
killed server's reply interrupted for every reader, a clean exit interrupting at once);
``chatHistory/changed`` reason ``"reply"`` at most twice a second; retention never deleting a
streaming row; every bad input answering an error that names its field and changing nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.wire import Wire

WORKSPACE = "file:///home/ada/project"
CHANGED = "chatHistory/changed"
#: The lease these tests run with (ms): a killed server's reply is interrupted within ~2 s.
SHORT_LEASE = {"CHAT_HISTORY_REPLY_LEASE_MS": "1200"}

pytestmark = pytest.mark.engines


@pytest.fixture
def open_window(tmp_path: Path, databases: Databases | None) -> Iterator[Callable[..., Wire]]:
    """Servers (editor windows) on one storage folder and workspace (on PostgreSQL: one
    database), closed at the end."""
    opened: list[Wire] = []

    def make(
        env: dict[str, str] | None = None, settings: Any = None, short_lease: bool = True
    ) -> Wire:
        options: dict[str, Any] = {"workspace": WORKSPACE}
        if databases is not None:
            options["database"] = databases.url(tmp_path)
        wire = Wire(tmp_path, env={**(SHORT_LEASE if short_lease else {}), **(env or {})})
        opened.append(wire)
        wire.initialize(configuration=False, options=options, settings=settings)
        return wire

    yield make
    for wire in opened:
        with contextlib.suppress(Exception):
            wire.close()


def rows(wire: Wire, conversation: str = "c") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wire.call("chatHistory/get", {"conversationId": conversation})[
        "messages"
    ]
    return found


def begin(wire: Wire, conversation: str = "c", **params: Any) -> dict[str, Any]:
    row: dict[str, Any] = wire.call(
        "chatHistory/beginReply", {"conversationId": conversation, **params}
    )
    return row


def update(wire: Wire, row_id: int, conversation: str = "c", **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = wire.call(
        "chatHistory/updateReply", {"conversationId": conversation, "id": row_id, **params}
    )
    return answer


def end(wire: Wire, row_id: int, status: str, conversation: str = "c", **params: Any) -> Any:
    return wire.call(
        "chatHistory/endReply",
        {"conversationId": conversation, "id": row_id, "status": status, **params},
    )


def ask(wire: Wire, text: str = "why is the sky blue?", conversation: str = "c") -> None:
    wire.call(
        "chatHistory/append",
        {"conversationId": conversation, "messages": [{"role": "user", "content": text}]},
    )


def search(wire: Wire, query: str) -> list[int]:
    hits = wire.call("chatHistory/search", {"query": query})["results"]
    return [hit["id"] for hit in hits]


def wait_until(check: Callable[[], bool], seconds: float) -> float:
    """Seconds until ``check()`` held (fails past ``seconds``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "did not happen in time"
        time.sleep(0.1)
    return time.monotonic() - started


# -- the reply while it streams ---------------------------------------------------------------


def test_a_reply_is_stored_while_it_streams_and_ends_complete(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window()
    ask(wire)
    row = begin(wire, message={"content": "Rayleigh", "metadata": {"model": "m1"}})
    assert (row["role"], row["status"], row["content"]) == ("assistant", "streaming", "Rayleigh")
    assert update(wire, row["id"], contentDelta=" scattering") == {"id": row["id"], "length": 19}
    assert update(wire, row["id"], contentDelta=" of sunlight ☀") == {"id": row["id"], "length": 33}
    stored = rows(wire)[-1]
    assert (stored["id"], stored["status"]) == (row["id"], "streaming")
    assert stored["content"] == "Rayleigh scattering of sunlight ☀"
    assert search(wire, "scattering") == [], "search sees a reply once it ended"

    answer = end(wire, row["id"], "complete", metadata={"model": "m1", "done": True})

    message = answer["message"]
    assert (message["status"], message["content"]) == ("complete", stored["content"])
    assert message["tokens"] > stored["tokens"] and message["metadata"]["done"] is True
    assert answer["pruned"] is None
    assert rows(wire)[-1] == message
    assert search(wire, "scattering") == [row["id"]]


def test_more_than_a_fold_of_parts_reads_back_whole(open_window: Callable[..., Wire]) -> None:
    wire = open_window()
    row = begin(wire)
    deltas = [f"<{i}>" for i in range(150)]  # more than store.replies.FOLD_PARTS, twice
    for delta in deltas:
        update(wire, row["id"], contentDelta=delta)
    assert rows(wire)[-1]["content"] == "".join(deltas)
    update(wire, row["id"], content="replaced whole", toolCalls=[{"id": "t1", "name": "ls"}])
    update(wire, row["id"], contentDelta="!", providerData={"anthropic": {"x": 1}})
    stored = rows(wire)[-1]
    assert stored["content"] == "replaced whole!"
    assert stored["toolCalls"] == [{"id": "t1", "name": "ls", "arguments": {}}]
    assert stored["providerData"] == {"anthropic": {"x": 1}}
    ended = end(wire, row["id"], "interrupted")["message"]
    assert (ended["status"], ended["content"]) == ("interrupted", "replaced whole!")
    assert ended["toolCalls"] == stored["toolCalls"]


def test_an_interrupted_reply_continues_in_the_same_row(open_window: Callable[..., Wire]) -> None:
    wire = open_window()
    ask(wire)
    row = begin(wire, message={"content": "The sky is"})
    end(wire, row["id"], "interrupted")
    again = begin(wire, continueId=row["id"])
    assert (again["id"], again["status"], again["content"]) == (
        row["id"],
        "streaming",
        "The sky is",
    )
    update(wire, row["id"], contentDelta=" blue.")
    done = end(wire, row["id"], "complete")["message"]
    assert (done["id"], done["content"], done["status"]) == (
        row["id"],
        "The sky is blue.",
        "complete",
    )
    assert [r["id"] for r in rows(wire)].count(row["id"]) == 1


def test_append_keeps_a_cut_reply_a_client_kept(open_window: Callable[..., Wire]) -> None:
    wire = open_window()
    stored = wire.call(
        "chatHistory/append",
        {
            "conversationId": "c",
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "half", "status": "interrupted"},
            ],
        },
    )["messages"]
    assert [m["status"] for m in stored] == ["complete", "interrupted"]
    for bad in (
        {"role": "assistant", "status": "streaming"},
        {"role": "user", "status": "interrupted"},
    ):
        error = wire.error(
            "chatHistory/append",
            {"conversationId": "c", "messages": [{**bad, "content": "x"}]},
        )
        assert (error["code"], error["data"]["field"]) == (-32602, "messages[0].status")
    assert len(rows(wire)) == 2


# -- one streaming row per conversation, bad input -------------------------------------------


def test_a_second_begin_is_1004_from_any_window_and_changes_nothing(
    open_window: Callable[..., Wire],
) -> None:
    first, second = open_window(), open_window()
    row = begin(first)
    for wire in (first, second):
        error = wire.error("chatHistory/beginReply", {"conversationId": "c"})
        assert (error["code"], error["data"]) == (1004, {"id": row["id"]})
    assert [r["id"] for r in rows(second)] == [row["id"]]
    # Another window may not write into it either.
    error = second.error(
        "chatHistory/updateReply", {"conversationId": "c", "id": row["id"], "contentDelta": "x"}
    )
    assert (error["code"], error["data"]["field"]) == (-32602, "id")
    begin(first, "other")  # another conversation streams beside it


def expect_refused(wire: Wire, method: str, params: dict[str, Any], field: str) -> None:
    before = rows(wire)
    error = wire.error(method, {"conversationId": "c", **params})
    assert (error["code"], error["data"]["field"]) == (-32602, field), error
    assert rows(wire) == before


def test_every_bad_input_names_its_field_and_changes_nothing(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window()
    complete = wire.call(
        "chatHistory/append",
        {"conversationId": "c", "messages": [{"role": "assistant", "content": "done"}]},
    )["messages"][0]
    elsewhere = begin(wire, "elsewhere")
    gone = begin(wire, "gone")
    end(wire, gone["id"], "discard", conversation="gone")
    update_ = "chatHistory/updateReply"
    end_ = "chatHistory/endReply"
    for row_id in (complete["id"], elsewhere["id"], gone["id"], 10**9):
        expect_refused(wire, update_, {"id": row_id, "contentDelta": "x"}, "id")
        expect_refused(wire, end_, {"id": row_id, "status": "complete"}, "id")
    expect_refused(wire, "chatHistory/beginReply", {"continueId": complete["id"]}, "continueId")
    row = begin(wire)
    update(wire, row["id"], contentDelta="kept")
    expect_refused(
        wire, update_, {"id": row["id"], "contentDelta": "x" * 10_000_000}, "contentDelta"
    )
    expect_refused(wire, update_, {"id": row["id"], "contentDelta": "a", "content": "b"}, "content")
    expect_refused(wire, update_, {"id": row["id"], "toolCalls": [{"id": 3}]}, "toolCalls[0].id")
    expect_refused(wire, end_, {"id": row["id"], "status": "finished"}, "status")
    expect_refused(wire, "chatHistory/beginReply", {"message": {"role": "user"}}, "message.role")
    assert rows(wire)[-1]["content"] == "kept"


def test_ten_thousand_updates_a_second_are_refused_past_the_rate(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window()
    row = begin(wire)
    sent = [
        wire.request(
            "chatHistory/updateReply", {"conversationId": "c", "id": row["id"], "contentDelta": "x"}
        )
        for _ in range(2_000)
    ]
    answers = [wire.answer_to(request) for request in sent]
    refused = [a["error"] for a in answers if "error" in a]
    accepted = [a["result"]["length"] for a in answers if "result" in a]
    assert refused and accepted, "some refused past the rate, the burst accepted"
    assert {(e["code"], e["data"]["field"]) for e in refused} == {(-32602, "id")}
    # Nothing a refused update sent was stored.
    assert rows(wire)[-1]["content"] == "x" * len(accepted) == "x" * max(accepted)


# -- discard, search, retention ------------------------------------------------------------------

SECRET = "SECRET-7d1f2c3b-reply-residue"


def test_discard_leaves_no_residue_in_the_files(
    open_window: Callable[..., Wire], tmp_path: Path, databases: Databases | None
) -> None:
    """SQLite: the database, its -wal and -shm at once; PostgreSQL: the relation files after
    the purge."""
    wire = open_window()
    ask(wire, "kept")
    row = begin(wire, message={"content": f"first {SECRET}"})
    for _ in range(70):  # parts, and a fold of them
        update(wire, row["id"], contentDelta=f" {SECRET} " + "p" * 200)
    holding = files_holding(tmp_path, databases)
    assert holding(), "the test could not fail"

    assert end(wire, row["id"], "discard") == {"message": None, "pruned": None}

    if databases is not None:
        from chat_history.service.manager import ChatHistoryManager

        manager = ChatHistoryManager.on_database(databases.url(tmp_path))
        try:
            assert manager.purge()
        finally:
            manager.close()
    assert holding() == []
    assert [r["content"] for r in rows(wire)] == ["kept"]


def files_holding(folder: Path, databases: Databases | None) -> Callable[[], list[str]]:
    """The files of the test's database that hold SECRET (PostgreSQL: after a checkpoint)."""

    def holding() -> list[str]:
        if databases is None:
            files = [p for p in folder.iterdir() if p.name.startswith("chat-history.sqlite3")]
        else:
            name = databases.name(folder)
            databases.cluster.execute("CHECKPOINT", name)
            files = [p for p in databases.cluster.database_folder(name).iterdir() if p.is_file()]
        return [p.name for p in files if SECRET.encode() in p.read_bytes()]

    return holding


def test_retention_never_deletes_a_streaming_row_or_its_turn(
    open_window: Callable[..., Wire],
) -> None:
    wire = open_window(settings={"maxMessages": 2})
    ask(wire, "first question")
    begin(wire, message={"content": "streaming answer"})
    wire.call(
        "chatHistory/append",
        {
            "conversationId": "c",
            "messages": [
                {"role": "user", "content": "second"},
                {"role": "assistant", "content": "two"},
                {"role": "user", "content": "third"},
            ],
        },
    )
    kept = [r["content"] for r in rows(wire)]
    assert kept[:2] == ["first question", "streaming answer"] and kept[-1] == "third"
    assert "second" not in kept, "retention ran, on the other turns"


def test_search_finds_a_reply_once_it_was_interrupted(open_window: Callable[..., Wire]) -> None:
    wire = open_window()
    row = begin(wire, message={"content": "photons wobble"})
    update(wire, row["id"], contentDelta=" quietly")
    assert search(wire, "wobble") == []
    end(wire, row["id"], "interrupted")
    assert search(wire, "quietly") == [row["id"]]
    begin(wire, continueId=row["id"])  # streaming again: out of search until it ends
    assert search(wire, "quietly") == []


# -- the lease -----------------------------------------------------------------------------------


def status_of(wire: Wire, row_id: int) -> tuple[str, str]:
    row = next(r for r in rows(wire) if r["id"] == row_id)
    return row["status"], row["content"]


def test_a_killed_servers_reply_is_interrupted_for_every_reader(
    open_window: Callable[..., Wire],
) -> None:
    writer, reader = open_window(), open_window()
    ask(writer)
    row = begin(writer, message={"content": "what the user saw"})
    update(writer, row["id"], contentDelta=" before the crash")
    assert status_of(reader, row["id"]) == ("streaming", "what the user saw before the crash")
    writer.process.send_signal(signal.SIGKILL)
    writer.finish()

    waited = wait_until(lambda: status_of(reader, row["id"])[0] == "interrupted", 15)

    assert waited < 10  # the lease here is 1.2 s (the default's bound: the test below)
    assert status_of(reader, row["id"]) == ("interrupted", "what the user saw before the crash")
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
    wait_until(lambda: status_of(second, row["id"])[0] == "interrupted", 40)
    assert time.monotonic() - killed <= 30
    assert status_of(second, row["id"]) == ("interrupted", "long answer")


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
    assert status_of(reader, row["id"]) == ("interrupted", "cut")


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
