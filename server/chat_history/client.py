"""A minimal synchronous JSON-RPC client that starts the real server over stdio with LSP framing.
Used by the demo, the benchmarks and the tests that need byte-level control of the wire."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

SERVER_COMMAND = [sys.executable, "-m", "chat_history"]


class RpcError(Exception):
    """An error answer from the server, with its JSON-RPC ``code`` and ``data``."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.data = error.get("data")


class StdioClient:
    """One server process. Server-to-client notifications are kept in ``notifications``; its
    ``workspace/configuration`` requests are answered with ``configuration``."""

    def __init__(
        self,
        storage: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        command: list[str] | None = None,
        stderr: int | IO[bytes] | None = None,
    ) -> None:
        self.storage = storage
        self.configuration: Any = None
        self.process = subprocess.Popen(
            command or SERVER_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr is None else stderr,
            env=dict(env) if env is not None else None,
        )
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the server's stdin (tests send broken frames too)."""
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: Mapping[str, Any]) -> None:
        """Send one JSON-RPC message in LSP base framing."""
        body = json.dumps(message).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer comes)."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def receive(self) -> dict[str, Any]:
        """The next message the server writes: an answer or a notification; EOFError when it closed
        its stdout."""
        assert self.process.stdout is not None
        length = None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError("the server closed its stdout")
            if line == b"\r\n":
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise ValueError("a message without Content-Length")
        message: dict[str, Any] = json.loads(self.process.stdout.read(length))
        return message

    def response(self, request_id: Any) -> dict[str, Any]:
        """Read until the response to ``request_id``, keeping notifications on the way."""
        while True:
            message = self.receive()
            if "method" in message:
                if "id" in message:
                    items = message.get("params", {}).get("items", [])
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "result": [self.configuration] * len(items),
                        }
                    )
                else:
                    self.notifications.append(message)
                continue
            if message.get("id") == request_id:
                return message

    def call_raw(self, method: str, params: Any = None) -> dict[str, Any]:
        """The whole response message (``result`` or ``error``)."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self.response(self._next_id)

    def call(self, method: str, params: Any = None) -> Any:
        """The result, or RpcError."""
        answer = self.call_raw(method, params)
        if "error" in answer:
            raise RpcError(answer["error"])
        return answer.get("result")

    def initialize(
        self, settings: Any = None, *, configuration: bool = False, **options: Any
    ) -> dict[str, Any]:
        """``initialize`` then ``initialized``, with the storage folder, the settings and any other
        initialization options; returns the initialize result."""
        init: dict[str, Any] = dict(options)
        if self.storage is not None:
            init["storagePath"] = str(self.storage)
        if settings is not None:
            init["settings"] = settings
        capabilities = {"workspace": {"configuration": True}} if configuration else {}
        result: dict[str, Any] = self.call(
            "initialize",
            {"processId": None, "capabilities": capabilities, "initializationOptions": init},
        )
        self.notify("initialized", {})
        return result

    def close(self) -> int:
        """shutdown + exit, then the exit code (the process is killed if it does not exit)."""
        if self.process.poll() is None:
            try:
                self.call_raw("shutdown")
                self.notify("exit")
            except (OSError, EOFError, ValueError):
                pass
        try:
            return self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)
        finally:
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):  # a killed server: nothing to flush to
                        stream.close()

    def __enter__(self) -> StdioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
