"""Writing LSP base frames: UTF-8 JSON bodies with a Content-Length in bytes, one lock per
stdout, and an error answer in place of one that cannot be encoded or is larger than
``MAX_ANSWER_BYTES``. No pygls here (framing.py reads; lsp_adapter.py plugs this into pygls)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from chat_history.errors import cut, shown

log = logging.getLogger("chat_history")

INTERNAL_ERROR = -32603
#: The largest answer written. Bodies are UTF-8, and a JSON text of N bytes decodes to at most N
#: UTF-16 code units, so a client on Node/V8 (longest string: 2**29 - 24 units) can always read
#: one. Every valid append's answer fits: it echoes what the request sent (at most
#: MAX_FRAME_BYTES), plus ~200 bytes per stored row and a few bytes per re-encoded number.
#: A larger answer (``get`` without ``limit`` of a huge history) is an error that says to page.
MAX_ANSWER_BYTES = 384 * 1024 * 1024

_HEADER = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"


def frame_header(size: int) -> bytes:
    return _HEADER % size


class FrameWriter:
    """stdout for pygls and for frames written directly: one lock, so the header and body of a
    frame written from one thread are never split by another's; once the client has closed
    stdout, later writes are dropped (the work behind them still completes)."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        with self._lock:
            self._stdout.close()

    def write(self, data: bytes) -> None:
        self.write_parts(data)

    def write_frame(self, body: bytes) -> None:
        self.write_parts(frame_header(len(body)), body)

    def write_parts(self, *parts: bytes) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                for part in parts:
                    self._stdout.write(part)
                self._stdout.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:  # ValueError: closed file
                self.closed = True
                log.warning("the client closed stdout (%s); later answers are dropped", exc)


def encode(data: Any, default: Callable[[Any], Any]) -> bytes:
    """One message as compact UTF-8 JSON (non-ASCII as is, not six-byte escapes). A lone
    surrogate, which only a string can hold, becomes its ``\\uXXXX`` escape."""
    text = json.dumps(data, default=default, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


def answer_body(data: Any, default: Callable[[Any], Any]) -> bytes | None:
    """The body of a message to send; for an answer that cannot be encoded or is larger than
    ``MAX_ANSWER_BYTES``, an error answer under its id instead, so that no request goes
    unanswered. None when a message that is not an answer cannot be sent."""
    msg_id = getattr(data, "id", None) if not isinstance(data, dict) else data.get("id")
    is_answer = (
        hasattr(data, "result")
        or hasattr(data, "error")
        or (isinstance(data, dict) and ("result" in data or "error" in data))
    )
    try:
        body = encode(data, default)
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        log.error("could not encode a message (id %s): %s", shown(msg_id), cut(repr(exc)))
        if not is_answer:
            return None
        reason = "nested too deeply" if isinstance(exc, RecursionError) else cut(str(exc))
        return error_body(
            msg_id, INTERNAL_ERROR, f"Internal error: the answer cannot be sent ({reason})"
        )
    if is_answer and len(body) > MAX_ANSWER_BYTES:
        size = len(body)
        del body
        log.warning(
            "answer %s of %d bytes refused (limit %d)", shown(msg_id), size, MAX_ANSWER_BYTES
        )
        return error_body(
            msg_id,
            INTERNAL_ERROR,
            f"Internal error: the answer would be {size:,} bytes, more than the "
            f"{MAX_ANSWER_BYTES:,} one answer may carry; ask for less at a time (chatHistory/get: "
            "pages with limit and beforeId)",
            {"answerBytes": size, "maxAnswerBytes": MAX_ANSWER_BYTES},
        )
    return body


def error_body(msg_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": msg_id, "error": error}, repr)
