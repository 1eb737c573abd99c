"""``initializationOptions.database`` under hostile sizes and unreachable servers, over the real
server process (issue 43 item 13): a connection string past its bound is refused at once with
-32602 naming ``database`` (it was read in time quadratic in its length: 10 MB never answered),
more hosts than the bound likewise, and a database that does not answer is refused with 1002
within the connect timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Late
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.rawclient import StdioClient

from chat_history.store.postgres.link import CONNECT_TIMEOUT_S
from chat_history.store.postgres.url import MAX_DATABASE_CHARS, MAX_HOSTS

pytest.importorskip("psycopg")


def answered(server: StdioClient, method: str, params: Any, within: float) -> dict[str, Any]:
    """The answer to one request, which must come within ``within`` seconds (else the server is
    killed and the test fails)."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(server.call_raw, method, params)
        try:
            return future.result(within)
        except Late:
            server.process.kill()
            raise AssertionError(f"{method}: no answer in {within} s") from None


def up(server: StdioClient) -> None:
    """Wait until the process has started and reads (a request before ``initialize`` is
    -32002), so that a time taken after it is the option's, not the process start's, which a
    loaded machine can make seconds long."""
    answer = answered(server, "chatHistory/listConversations", {}, 60)
    assert answer["error"]["code"] == -32002, answer


def initialize(server: StdioClient, storage: Path, database: str) -> dict[str, Any]:
    params = {
        "processId": None,
        "capabilities": {},
        "initializationOptions": {"storagePath": str(storage), "database": database},
    }
    return answered(server, "initialize", params, 15)


@pytest.mark.parametrize(
    "database",
    [
        "host=/nonexistent dbname=" + "x" * 10_000_000,
        "host=/nonexistent dbname=" + "x" * MAX_DATABASE_CHARS,
        "postgresql://me@/" + "a:" * 5_000_000,
    ],
    ids=["10 MB", "one past the bound", "10 MB URI"],
)
def test_a_connection_string_past_its_bound_is_refused_at_once(
    tmp_path: Path, database: str
) -> None:
    server = StdioClient(tmp_path / "store")
    try:
        up(server)
        started = time.monotonic()
        answer = initialize(server, tmp_path / "store", database)
        assert time.monotonic() - started < 10
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"]["field"] == "database"
        assert f"{MAX_DATABASE_CHARS:,}" in answer["error"]["message"]
        assert "xxxx" not in answer["error"]["message"]  # never repeated
        assert server.process.poll() is None
    finally:
        server.close()


def test_a_string_within_the_bound_is_read_quickly_and_an_absent_server_answers_1002(
    tmp_path: Path,
) -> None:
    database = "host=/nonexistent dbname="
    database += "x" * (MAX_DATABASE_CHARS - len(database))
    server = StdioClient(tmp_path / "store")
    try:
        up(server)
        started = time.monotonic()
        assert "result" in initialize(server, tmp_path / "store", database)
        assert time.monotonic() - started < 5
        server.notify("initialized", {})
        answer = answered(
            server, "chatHistory/get", {"conversationId": "c"}, CONNECT_TIMEOUT_S + 10
        )
        assert answer["error"]["code"] == 1002
    finally:
        server.close()


def test_more_hosts_than_the_bound_are_refused(tmp_path: Path) -> None:
    hosts = ",".join(["127.0.0.1"] * (MAX_HOSTS + 1))
    for database in (f"host={hosts} dbname=h", f"postgresql://me@{hosts}/h"):
        server = StdioClient(tmp_path / "store")
        try:
            answer = initialize(server, tmp_path / "store", database)
            assert answer["error"]["code"] == -32602, answer
            assert answer["error"]["data"]["field"] == "database"
            assert f"at most {MAX_HOSTS}" in answer["error"]["message"]
        finally:
            server.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a database that hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def test_a_database_that_never_answers_is_refused_within_the_connect_timeout(
    tmp_path: Path, silent_port: int
) -> None:
    database = f"host=127.0.0.1 port={silent_port} dbname=h connect_timeout=100000"
    server = StdioClient(tmp_path / "store")
    try:
        assert "result" in initialize(server, tmp_path / "store", database)
        server.notify("initialized", {})
        started = time.monotonic()
        answer = answered(
            server, "chatHistory/get", {"conversationId": "c"}, CONNECT_TIMEOUT_S + 15
        )
        assert answer["error"]["code"] == 1002
        assert "timeout" in answer["error"]["data"]["reason"]
        # the string's own connect_timeout does not lift the server's bound
        assert time.monotonic() - started < CONNECT_TIMEOUT_S + 10
    finally:
        server.close()
