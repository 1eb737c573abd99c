"""Helpers of the reliability tests: real server processes (``python -m chat_history``) driven
through the package's stdio client, with a deadline on every answer (a hang fails the test instead
of stalling it), and the bytes of the database files.

On PostgreSQL (a module marked ``engines`` using the ``server_databases`` fixture, tests/e2e/
conftest.py), every server and ``open_store`` of a storage folder use that folder's database
(``CHAT_HISTORY_DATABASE_URL``): two processes on one folder share one database, as on SQLite."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.conftest import Databases
from tests.e2e.rawclient import RpcError, StdioClient

from chat_history.store import HistoryStore, Store
from chat_history.store.choice import DATABASE_ENV
from chat_history.store.schema import DATABASE_FILE

#: Retention that never interferes with a test that counts rows.
KEEP_ALL = {"maxMessages": 100_000, "maxTokens": 0, "maxAgeHours": 0}
SUFFIXES = ("", "-wal", "-shm")
ANSWER_SECONDS = 20.0

#: The test's PostgreSQL databases by storage folder, while a test runs on PostgreSQL.
DATABASES: Databases | None = None


def open_store(storage: Path) -> HistoryStore:
    """The store a server on ``storage`` opens: its SQLite file, or on PostgreSQL its database."""
    if DATABASES is None:
        return Store(storage)
    from chat_history.store.postgres import PostgresStore

    return PostgresStore(DATABASES.url(storage))


class Server(StdioClient):
    """One real server process. ``cwd`` and ``umask`` are the process's own; its stderr goes to
    a file (a pipe nobody reads would block the server once full)."""

    def __init__(
        self,
        storage: Path,
        log: Path,
        *,
        cwd: Path | None = None,
        umask: int | None = None,
        env: Mapping[str, str] | None = None,
        preexec: str = "",
    ) -> None:
        prelude = [preexec]
        if cwd is not None:
            prelude.append(f"os.chdir({str(cwd)!r})")
        if umask is not None:
            prelude.append(f"os.umask({umask})")
        code = "; ".join(
            [
                "import os",
                *filter(None, prelude),
                "from chat_history.__main__ import main",
                "main()",
            ]
        )
        if DATABASES is not None:
            env = {**(env if env is not None else os.environ), DATABASE_ENV: DATABASES.url(storage)}
        self.log_path = log
        self._log = log.open("ab")
        super().__init__(storage, command=[sys.executable, "-c", code], stderr=self._log, env=env)

    def request(self, method: str, params: Any = None, timeout: float = ANSWER_SECONDS) -> Any:
        """The whole response message; the process is killed (and the test fails) when no answer
        arrives within ``timeout`` seconds."""
        with deadline(self, timeout, f"{method} was not answered within {timeout} s"):
            return self.call_raw(method, params)

    def ok(self, method: str, params: Any = None, timeout: float = ANSWER_SECONDS) -> Any:
        answer = self.request(method, params, timeout)
        if "error" in answer:
            raise RpcError(answer["error"])
        return answer["result"]

    def next_message(self, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        with deadline(self, timeout, f"no message within {timeout} s"):
            return self.receive()

    def append(self, conversation: str, *messages: dict[str, Any], **extra: Any) -> Any:
        return self.ok(
            "chatHistory/append",
            {"conversationId": conversation, "messages": list(messages), **extra},
        )

    def get(self, conversation: str, **extra: Any) -> list[dict[str, Any]]:
        result = self.ok("chatHistory/get", {"conversationId": conversation, **extra})
        messages: list[dict[str, Any]] = result["messages"]
        return messages

    def alive(self) -> bool:
        """Still serving: a request that needs no storage is answered -32602."""
        answer = self.request("chatHistory/get", {"conversationId": ""})
        return bool(answer["error"]["code"] == -32602)

    def stderr_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> int:
        try:
            return super().close()
        finally:
            self._log.close()


class Hung(AssertionError):
    pass


@contextlib.contextmanager
def deadline(server: StdioClient, seconds: float, what: str) -> Iterator[None]:
    """Kill the server when the block takes longer than ``seconds`` (its read then ends), and
    report the hang as the failure."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        with contextlib.suppress(OSError):
            server.process.kill()

    timer = threading.Timer(seconds, expire)
    timer.start()
    try:
        yield
    except (EOFError, OSError, ValueError) as exc:
        if fired.is_set():
            raise Hung(what) from exc
        raise
    finally:
        timer.cancel()


def start(storage: Path, settings: Any = None, *, log: Path | None = None, **kwargs: Any) -> Server:
    server = Server(storage, log or storage.parent / f"{storage.name}.stderr.log", **kwargs)
    with deadline(server, 30, "initialize was not answered"):
        server.initialize(settings, workspace="ws")
    return server


def frame(body: bytes | str) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def request_body(request_id: int, method: str, params: Any) -> bytes:
    """A request as compact JSON; non-ASCII text (lone surrogates too) as \\u escapes."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        separators=(",", ":"),
    ).encode()


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def database_path(folder: Path) -> Path:
    return folder / DATABASE_FILE


def database_bytes(folder: Path) -> dict[str, bytes]:
    """The database file and its -wal/-shm companions that exist."""
    base = database_path(folder)
    return {
        suffix: Path(f"{base}{suffix}").read_bytes()
        for suffix in SUFFIXES
        if Path(f"{base}{suffix}").exists()
    }


def occurrences(folder: Path, needle: str) -> int:
    data = needle.encode()
    return sum(blob.count(data) for blob in database_bytes(folder).values())


def tree(root: Path) -> set[str]:
    """Every file and folder under ``root``, as relative paths."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False)


def is_root() -> bool:
    return os.geteuid() == 0
