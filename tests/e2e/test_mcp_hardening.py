"""``chat-history mcp`` against what a hostile or careless client sends (issue 43): a string cut
inside an emoji (a lone UTF-16 surrogate, which a JavaScript agent's ``JSON.stringify`` sends as
the escape ``\\ud83d``) is answered, as a tool error naming the argument, and the server keeps
serving; ``--db`` that names no database is refused before anything is created or changed."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import ClientSession
from mcp.shared.message import SessionMessage

from chat_history.model import Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager

WS = "file:///work/project"
LONE = "\ud83d"  # the first half of 😀 (U+1F600), as a string cut inside the emoji holds it


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite3"
    manager = ChatHistoryManager.open(path)
    try:
        history.append(
            manager,
            Key(WS, "greek"),
            [
                Message(role="user", content="alpha beta gamma 😀"),
                Message(role="assistant", content="delta"),
            ],
        )
    finally:
        manager.close()
    return path


def command(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "chat_history.cli", "--db", str(db), "mcp", *args]


@asynccontextmanager
async def escaping_session(db: Path) -> AsyncIterator[ClientSession]:
    """The official SDK's ``ClientSession`` over the server's stdio, its messages written as
    ``JSON.stringify`` writes them: a lone surrogate as its ``\\uXXXX`` escape (the SDK's own
    stdio transport cannot encode one)."""
    async with await anyio.open_process(command(db, "--workspace", WS)) as process:
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout
        incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def read() -> None:
            async with incoming_send:
                pending = ""
                async for chunk in TextReceiveStream(stdout):
                    pending += chunk
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        message = types.jsonrpc_message_adapter.validate_json(line)
                        await incoming_send.send(SessionMessage(message))

        async def write() -> None:
            async with outgoing_receive:
                async for item in outgoing_receive:
                    plain = item.message.model_dump(by_alias=True, exclude_unset=True)
                    await stdin.send((json.dumps(plain) + "\n").encode("ascii"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            async with ClientSession(incoming, outgoing) as client:
                with anyio.fail_after(30):
                    await client.initialize()
                yield client
            await stdin.aclose()
            tasks.cancel_scope.cancel()


async def tool_error(client: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    with anyio.fail_after(20):
        result = await client.call_tool(name, arguments)
    assert result.is_error, result
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return text.text


@pytest.mark.asyncio
async def test_a_string_cut_inside_an_emoji_is_a_tool_error_naming_the_argument(
    db: Path,
) -> None:
    async with escaping_session(db) as client:
        said = await tool_error(client, "search_history", {"query": f"{LONE} alpha"})
        assert said.startswith("query:") and "surrogate" in said
        said = await tool_error(client, "search_history", {"query": "alpha\udc00"})
        assert said.startswith("query:")
        said = await tool_error(
            client, "search_history", {"query": "alpha", "conversationId": f"greek{LONE}"}
        )
        assert said.startswith("conversationId:")
        said = await tool_error(client, "list_conversations", {"titleContains": LONE})
        assert said.startswith("titleContains:")
        said = await tool_error(client, "read_conversation", {"conversationId": LONE})
        assert said.startswith("conversationId:")
        # still serving, and a whole emoji is text like any other
        with anyio.fail_after(20):
            found = await client.call_tool("search_history", {"query": "gamma 😀"})
        assert not found.is_error
        assert found.structured_content is not None
        assert [hit["conversationId"] for hit in found.structured_content["results"]] == ["greek"]


class RawPeer:
    """The server driven by bytes written as they are: one JSON-RPC message per line."""

    def __init__(self, db: Path) -> None:
        self.process = subprocess.Popen(
            command(db, "--workspace", WS),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.pending = b""

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 20) -> dict[str, Any]:
        """The next line the server writes (the test fails when none comes in ``timeout``)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, "no answer"
            chunk = os.read(fd, 65536)
            assert chunk, "the server closed its stdout"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> str:
        """Close stdin; the server's exit code must be 0. Its stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        stderr = self.process.stderr.read().decode()
        assert self.process.wait(timeout=30) == 0, stderr
        return stderr


def call_line(id_: object, name: bytes, arguments: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
        % (json.dumps(id_).encode(), name, arguments)
    )


def test_raw_lone_surrogate_escapes_are_answered_and_the_server_keeps_serving(db: Path) -> None:
    peer = RawPeer(db)
    try:
        peer.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "1"},
                    },
                }
            ).encode()
        )
        assert peer.answer()["id"] == 1
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        # the escape exactly as the bytes of a JavaScript agent's request hold it
        peer.send(call_line(2, b"search_history", b'{"query":"\\ud83d alpha"}'))
        answer = peer.answer()
        assert answer["id"] == 2 and answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"].startswith("query:")
        # a lone low half, in a key and in the tool's name: answered too
        peer.send(call_line(3, b"search_history", b'{"query":"alpha","limit\\udc00":1}'))
        assert peer.answer()["id"] == 3
        peer.send(call_line(4, b"search_\\ud83d", b'{"query":"alpha"}'))
        answer = peer.answer()
        assert answer["id"] == 4 and answer["result"]["isError"] is True
        # in a method's name: the method is unknown, and said so
        peer.send(b'{"jsonrpc":"2.0","id":5,"method":"tools/\\ud83d","params":{}}')
        answer = peer.answer()
        assert answer["id"] == 5 and "error" in answer
        # later calls work, and find what they ask for
        peer.send(call_line(6, b"search_history", b'{"query":"alpha"}'))
        answer = peer.answer()
        assert answer["id"] == 6 and answer["result"]["isError"] is False
        assert answer["result"]["structuredContent"]["results"]
    finally:
        stderr = peer.close()
    assert "Traceback" not in stderr


def run_mcp(db: Path, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``chat-history --db DB mcp`` with stdin closed at once: it serves or it refuses."""
    return subprocess.run(
        command(db, "--workspace", WS),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize("name", ["missing", "missing/history.sqlite3", "missing/deeper"])
def test_a_missing_db_is_refused_and_nothing_is_created(tmp_path: Path, name: str) -> None:
    done = run_mcp(tmp_path / name)
    assert done.returncode != 0
    assert "--db" in done.stderr and "no database" in done.stderr, done.stderr
    assert "only reads" in done.stderr
    assert not (tmp_path / "missing").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_a_database_is_refused_and_left_empty(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    done = run_mcp(folder)
    assert done.returncode != 0 and "--db" in done.stderr and "no database" in done.stderr
    assert list(folder.iterdir()) == [] and folder.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(
    "content",
    [b"these are my notes, not a database\n" * 200, b"", b"SQLite"],
    ids=["notes", "empty", "short"],
)
def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_is(
    tmp_path: Path, content: bytes
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    folder.chmod(0o755)
    file = folder / "notes.sqlite3"
    file.write_bytes(content)
    file.chmod(0o644)
    done = run_mcp(file)
    assert done.returncode != 0
    assert "--db" in done.stderr and "not a chat history database" in done.stderr, done.stderr
    assert file.read_bytes() == content and file.stat().st_mode & 0o777 == 0o644
    assert folder.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in folder.iterdir()) == ["notes.sqlite3"]


def test_the_default_store_is_still_made_for_an_agent_configured_before_the_first_chat(
    tmp_path: Path,
) -> None:
    storage = tmp_path / "default-storage"
    done = subprocess.run(
        [sys.executable, "-m", "chat_history.cli", "mcp", "--workspace", WS],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHAT_HISTORY_STORAGE": str(storage)},
    )
    assert done.returncode == 0, done.stderr
    assert storage.is_dir()


def test_a_database_is_served(db: Path) -> None:
    done = run_mcp(db)
    assert done.returncode == 0, done.stderr
