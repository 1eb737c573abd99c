"""Several real server processes sharing one database (semantics.md, "Storage"): concurrent
appends through stdio lose nothing, keep each process's order and never answer "database is
locked"; each process's in-memory fast path never serves rows another process deleted, and sees
rows another process added."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.rawclient import RpcError
from tests.e2e.reliability import KEEP_ALL, Server, assistant, frame, request_body, start, user

from chat_history.errors import StorageError
from chat_history.store import Store

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

PROCESSES = 4
APPENDS = 500


def _writer(
    server: Server,
    tag: str,
    conversation: str,
    go: threading.Barrier,
    errors: list[str],
    seen_counts: list[int],
) -> None:
    """APPENDS appends in order; every 50th, a full get (the fast path) must hold all of this
    process's rows so far, in its order, and never fewer rows than the previous get."""
    go.wait()
    previous = 0
    for n in range(APPENDS):
        try:
            server.append(conversation, user(f"{tag}-{n:03d}"))
            if n % 50 == 49:
                rows = server.get(conversation)
                mine = [r["content"] for r in rows if r["content"].startswith(f"{tag}-")]
                if mine != [f"{tag}-{i:03d}" for i in range(n + 1)]:
                    errors.append(f"{tag}: get after {n + 1} appends saw {len(mine)} own rows")
                if len(rows) < previous:
                    errors.append(f"{tag}: get went back from {previous} to {len(rows)} rows")
                previous = len(rows)
                seen_counts.append(len(rows))
        except RpcError as exc:
            errors.append(f"{tag}: append {n}: {exc.code} {exc} {exc.data}")
        except Exception as exc:
            errors.append(f"{tag}: append {n}: {type(exc).__name__}: {exc}")
            return


def _start_concurrently(storage: Path, count: int) -> list[Server]:
    """Start ``count`` servers on a folder that does not exist yet and initialize them at once, so
    their first requests race to create the database."""
    servers = [Server(storage, storage.parent / f"server{i}.log") for i in range(count)]
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def init(server: Server) -> None:
        barrier.wait()
        try:
            server.initialize(KEEP_ALL, workspace="ws")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=init, args=(s,)) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    return servers


@pytest.mark.parametrize("shared", [True, False], ids=["one-conversation", "own-conversations"])
def test_four_processes_append_concurrently_without_losing_or_reordering_a_row(
    tmp_path: Path, shared: bool
) -> None:
    storage = tmp_path / "store"
    servers = _start_concurrently(storage, PROCESSES)
    try:
        tags = [f"p{i}" for i in range(PROCESSES)]
        conversations = ["shared" if shared else f"own-{tag}" for tag in tags]
        errors: list[str] = []
        seen: list[int] = []
        go = threading.Barrier(PROCESSES)
        threads = [
            threading.Thread(target=_writer, args=(server, tag, conv, go, errors, seen))
            for server, tag, conv in zip(servers, tags, conversations, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads), "a writer hung"
        assert errors == []

        for reader in servers:  # every process's view of every conversation is the same
            stored: list[dict[str, Any]] = []
            for conversation in sorted(set(conversations)):
                stored.extend(reader.get(conversation))
            assert len(stored) == PROCESSES * APPENDS
            for tag in tags:
                mine = [r for r in stored if r["content"].startswith(f"{tag}-")]
                assert [r["content"] for r in mine] == [f"{tag}-{n:03d}" for n in range(APPENDS)]
                assert [r["id"] for r in mine] == sorted(r["id"] for r in mine)
            if shared:
                assert [r["id"] for r in stored] == sorted({r["id"] for r in stored})
                # Turn numbers come from the append's own transaction: no two appends shared one.
                assert [r["turn"] for r in stored] == list(range(1, PROCESSES * APPENDS + 1))
        listed = servers[0].ok("chatHistory/listConversations", {})["conversations"]
        assert sum(c["messageCount"] for c in listed) == PROCESSES * APPENDS
        for server in servers:
            assert "locked" not in server.stderr_text()
    finally:
        for server in servers:
            server.close()


def test_fast_path_never_serves_rows_another_process_deleted(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    a = start(storage, KEEP_ALL, log=tmp_path / "a.log")
    b = start(storage, KEEP_ALL, log=tmp_path / "b.log")
    try:
        a.append("c", user("from a"), assistant("reply to a"))
        assert [r["content"] for r in a.get("c")] == ["from a", "reply to a"]  # cached in a
        assert b.ok("chatHistory/clear", {"conversationId": "c"}) == {"deletedMessages": 2}
        assert a.get("c") == []
        b.append("c", user("from b"))
        assert [r["content"] for r in a.get("c")] == ["from b"]
        assert [r["content"] for r in a.get("c")] == ["from b"]  # and again, from the cache
    finally:
        a.close()
        b.close()


def test_fast_path_never_serves_rows_another_process_pruned(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    a = start(storage, KEEP_ALL, log=tmp_path / "a.log")
    b = start(storage, {"maxMessages": 2, "maxTokens": 0}, log=tmp_path / "b.log")
    try:
        a.append("c", user("q1"), assistant("a1"))
        assert len(a.get("c")) == 2  # cached in a
        pruned = b.append("c", user("q2"), assistant("a2"))["pruned"]
        assert pruned is not None and pruned["droppedMessages"] == 2
        assert [r["content"] for r in a.get("c")] == ["q2", "a2"]
        a.append("c", user("q3"))  # a's own append extends what it cached: still no q1
        assert [r["content"] for r in a.get("c")] == ["q2", "a2", "q3"]
        b.ok("chatHistory/saveSummary", {"conversationId": "c", "summary": "by b"})
        assert a.ok("chatHistory/getSummary", {"conversationId": "c"})["summary"] == "by b"
    finally:
        a.close()
        b.close()


def _sent(server: Server, conversation: str) -> list[str]:
    body = server.ok("chatHistory/prepare", {"conversationId": conversation, "provider": "openai"})
    return [m["content"] for m in body["body"]["messages"] if isinstance(m["content"], str)]


def test_what_a_process_remembers_of_a_conversation_follows_another_process(
    tmp_path: Path,
) -> None:
    # Each process remembers a conversation's totals, running turn and newest rows between
    # requests; the other process's appends, clears and retention must all reach it.
    storage = tmp_path / "store"
    a = start(storage, KEEP_ALL, log=tmp_path / "a.log")
    b = start(storage, {"maxMessages": 4, "maxTokens": 0}, log=tmp_path / "b.log")
    call = {"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}
    try:
        a.append("c", user("q1"), assistant("a1"), user("q2"))
        a.append("c", {"role": "assistant", "content": "", "toolCalls": [call]})
        assert _sent(a, "c") == ["q1", "a1", "q2"]  # a now remembers the newest rows
        b.append("c", {"role": "tool", "content": "r1", "toolCallId": "c1", "name": "read_file"})
        with pytest.raises(RpcError) as refused:  # b answered c1: nothing is pending any more
            a.append("c", {"role": "tool", "content": "r1", "toolCallId": "c1"})
        assert refused.value.code == -32602
        assert _sent(a, "c")[-1] == "r1"
        assert [r["content"] for r in a.get("c", limit=2)] == ["", "r1"]  # the newest page too
        b.append("c", assistant("a2"), user("q3"), assistant("a3"))  # prunes to the newest 4
        assert _sent(a, "c") == ["q3", "a3"]
        assert [r["content"] for r in a.get("c", limit=5)] == ["q3", "a3"]
        assert b.ok("chatHistory/clear", {"conversationId": "c"})["deletedMessages"] == 2
        assert _sent(a, "c") == []
        first = a.append("c", user("again"))["messages"][0]
        assert first["turn"] == 1
        assert _sent(a, "c") == ["again"]
    finally:
        a.close()
        b.close()


@pytest.mark.sqlite_only  # the race to create the SQLite file and switch it to WAL
def test_connections_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    """Editor windows started together race to create the file and switch it to WAL. Found here:
    the loser of the O_EXCL create, and a WAL switch while another connection holds the new file
    (SQLite answers "database is locked" at once, without its busy handler), were StorageErrors.
    Connections in threads race far more tightly than processes, so this uses Store directly."""
    failures: list[str] = []
    for trial in range(150):
        stores = [Store(tmp_path / f"t{trial}") for _ in range(6)]
        barrier = threading.Barrier(len(stores))

        def open_one(store: Store, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                with store.read():
                    pass
            except StorageError as exc:
                failures.append(str(exc))
            finally:
                store.close()

        threads = [threading.Thread(target=open_one, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert failures == []


def test_appends_a_client_sends_without_waiting_are_stored_in_the_order_sent(
    tmp_path: Path,
) -> None:
    """Found by the kill -9 test: requests ran on pygls's thread pool and raced for the manager's
    lock, so appends written back to back were stored out of order. Now one thread runs them in
    arrival order."""
    server = start(tmp_path / "store", KEEP_ALL)
    try:
        first = server._next_id + 1
        count = 300
        server.send_bytes(
            b"".join(
                frame(
                    request_body(
                        first + n,
                        "chatHistory/append",
                        {"conversationId": "c", "messages": [user(f"m{n:03d}")]},
                    )
                )
                for n in range(count)
            )
        )
        answers = [server.next_message() for _ in range(count)]
        assert all("result" in a for a in answers)
        assert [r["content"] for r in server.get("c")] == [f"m{n:03d}" for n in range(count)]
    finally:
        server.close()
