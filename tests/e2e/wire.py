"""A raw JSON-RPC stdio client for tests that control timing: it never answers the server by
itself (a test decides when, and whether, to answer ``workspace/configuration``), and it can
send requests without waiting for their answers."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chat_history.store.choice import DATABASE_ENV

SERVER = [sys.executable, "-m", "chat_history"]
WAIT = 60.0  # generous: a loaded CI machine is slow, and a hang must still fail


class Wire:
    """One server process; every message it sends is kept in ``received`` in arrival order."""

    def __init__(self, storage: Path, *, env: Mapping[str, str] | None = None) -> None:
        from tests.e2e import reliability  # its DATABASES: the test's engine (server_databases)

        self.storage = storage
        database = (
            {}
            if reliability.DATABASES is None
            else {DATABASE_ENV: reliability.DATABASES.url(storage)}
        )
        self.process = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **database, **(env or {})},
        )
        self.received: list[dict[str, Any]] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []  # read all along, so a chatty server never blocks
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = None
            while True:
                line = stdout.readline()
                if not line:
                    self._inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None
            self._inbox.put(json.loads(stdout.read(length)))

    # -- sending -----------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; its id (the answer is read with ``answer_to``)."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def reply(self, server_request: Mapping[str, Any], result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": server_request["id"], "result": result})

    # -- receiving ---------------------------------------------------------------------------

    def _pump(self, timeout: float) -> bool:
        """Move one message into ``received``; False when none came within ``timeout``."""
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return False
        if message is None:
            self._inbox.put(None)
            raise EOFError("the server closed its stdout")
        self.received.append(message)
        return True

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        """The first message (received so far or later) that satisfies ``predicate``."""
        index = 0
        while True:
            for message in self.received[index:]:
                if predicate(message):
                    return message
            index = len(self.received)
            if not self._pump(timeout):
                raise TimeoutError("no such message from the server")

    def drain(self, seconds: float) -> None:
        """Read whatever arrives within ``seconds``."""
        while self._pump(seconds):
            pass

    def answer_to(self, request_id: int, timeout: float = WAIT) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout)

    def answered(self, request_id: int) -> bool:
        """Whether the answer to ``request_id`` has arrived (reads what is there, no waiting)."""
        while self._pump(0.0):
            pass
        return any(m.get("id") == request_id and "method" not in m for m in self.received)

    def call(self, method: str, params: Any = None) -> Any:
        answer = self.answer_to(self.request(method, params))
        assert "error" not in answer, answer
        return answer["result"]

    def error(self, method: str, params: Any = None) -> dict[str, Any]:
        answer = self.answer_to(self.request(method, params))
        assert "error" in answer, answer
        error: dict[str, Any] = answer["error"]
        return error

    def configuration_request(self, timeout: float = WAIT) -> dict[str, Any]:
        """The next ``workspace/configuration`` request not yet returned by this method."""
        seen = getattr(self, "_seen_pulls", 0)
        pulls = 0

        def nth_pull(message: dict[str, Any]) -> bool:
            nonlocal pulls
            if message.get("method") != "workspace/configuration":
                return False
            pulls += 1
            return pulls > seen

        found = self.wait_for(nth_pull, timeout)
        self._seen_pulls = seen + 1
        return found

    def messages_of(self, method: str) -> list[dict[str, Any]]:
        while self._pump(0.0):
            pass
        return [m["params"] for m in self.received if m.get("method") == method]

    # -- lifecycle ---------------------------------------------------------------------------

    def initialize(
        self,
        *,
        settings: Any = None,
        configuration: bool = True,
        options: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """``initialize`` then ``initialized`` (not waiting for any pull)."""
        init: dict[str, Any] = {"storagePath": str(self.storage), **(options or {})}
        if settings is not None:
            init["settings"] = settings
        capabilities = {"workspace": {"configuration": True}} if configuration else {}
        result: dict[str, Any] = self.call(
            "initialize",
            {
                "processId": None,
                "capabilities": capabilities,
                "initializationOptions": init,
                **params,
            },
        )
        self.notify("initialized", {})
        return result

    def close(self) -> tuple[int, str]:
        """shutdown + exit; the exit code and everything written to stderr."""
        with contextlib.suppress(OSError, EOFError, TimeoutError):
            if self.process.poll() is None:
                self.answer_to(self.request("shutdown"), 30)
                self.notify("exit")
        return self.finish()

    def finish(self) -> tuple[int, str]:
        """Wait for the process to end (killing it after a while); exit code and stderr."""
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        self._stderr_reader.join(10)
        stderr = b"".join(self._stderr).decode(errors="replace")
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return code, stderr
