"""The stdio message loop that replaces pygls's ``run_async``: LSP base framing read defensively,
and every message handed to ``intake``, which answers every request that can be answered
(JSON-RPC 2.0, sections 4 and 5.1).

pygls 2.1.1 dies on a ``Content-Length`` too large to allocate and loses every later frame after a
header it cannot read. Here a header that cannot be read gets -32700 (id null), a frame longer
than ``MAX_FRAME_BYTES`` is answered from the bytes already read (``scan.top_level_id``) and
skipped, and the reader resynchronises on the next ``Content-Length`` header.

The cost of every input is bounded (frame size, ``Content-Length`` digits, the header line), and
requests already received are finished before the server exits (end of input, ``exit``)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from concurrent.futures import Executor
from typing import Any, BinaryIO

from pygls.protocol import JsonRPCProtocol

from chat_history.errors import shown
from chat_history.wire.transport import lsp_adapter, memory
from chat_history.wire.transport.intake import (
    INVALID_REQUEST,
    PARSE_ERROR,
    handle_body,
    send_error,
)
from chat_history.wire.transport.scan import top_level_id

log = logging.getLogger("chat_history")

#: The largest frame read into memory; a larger one is skipped (and answered when its id is found
#: near the start). Far above any valid request: an append holds at most 1,000 messages.
MAX_FRAME_BYTES = 256 * 1024 * 1024
_MAX_HEADER_LINE = 8_192

# Searched, not matched at the line start: after a frame whose Content-Length was wrong, the next
# header arrives glued to the leftover bytes of that body, and this finds it there.
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n?\Z", re.IGNORECASE)
_EXIT = re.compile(rb'"method"\s*:\s*"exit"')


class StdinReader:
    """Blocking stdin reads on an executor, with a bounded header line."""

    def __init__(self, stdin: BinaryIO, executor: Executor | None) -> None:
        self.stdin = stdin
        self.executor = executor

    async def frame(self) -> tuple[int | None, bytes | None, bytes | None] | None:
        """The next frame: (length, None, body), or (None, the bad Content-Length value, None),
        or (length, None, None) for a frame longer than ``MAX_FRAME_BYTES`` (not read); None
        at the end of input. Header and body are read on the executor in one go: each hop to
        the executor and back wakes two threads, so the stray lines before a header cost a
        ``readline`` each, not a hop each (500,000 short lines took 40 s), and a request costs
        one hop to read, not two (issue 36)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, read_frame, self.stdin)

    async def peek(self) -> bytes:
        """What can be read without blocking for more (nothing is consumed)."""
        peek = getattr(self.stdin, "peek", None)
        if peek is None:
            return b""
        loop = asyncio.get_running_loop()
        head: bytes = await loop.run_in_executor(self.executor, peek, _MAX_HEADER_LINE)
        return head


async def serve(reader: StdinReader, protocol: JsonRPCProtocol, stop: threading.Event) -> None:
    """Read frames until end of input (or ``stop``), handing each body to ``handle_body``. Every
    request already received is finished (and answered while stdout is open) before this returns
    at the end of input, and before an ``exit`` notification is handled."""
    pending: set[Any] = set()
    while not stop.is_set():
        frame = await reader.frame()
        if frame is None:
            await finish(protocol, pending, closed=True)
            return
        length, bad_header, body = frame
        if length is None:
            send_error(
                protocol,
                None,
                PARSE_ERROR,
                f"Parse error: invalid Content-Length header {shown(bad_header)}; frame skipped",
            )
            continue
        if length > MAX_FRAME_BYTES:
            # Answered from the bytes already here, then skipped like any garbage until the next
            # header: a client whose header lies about the length still gets served afterwards.
            send_error(
                protocol,
                top_level_id(await reader.peek()),
                INVALID_REQUEST,
                f"Invalid Request: the message is longer than the limit of {MAX_FRAME_BYTES:,} "
                "bytes",
            )
            continue
        if body is None or len(body) < length:
            await finish(protocol, pending, closed=True)
            return  # end of input inside a frame
        if len(body) < 1_024 and _EXIT.search(body) and _method(body) == "exit":
            await finish(protocol, pending, closed=False)
        track(protocol, handle_body(protocol, body), pending)
        # Not kept while the request runs and this loop waits for the next header: the parsed
        # request, its answer's text and that text's bytes are alive then already.
        del body
        memory.large_message(length)


def _method(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data.get("method") if isinstance(data, dict) else None


def track(protocol: JsonRPCProtocol, msg_id: Any, pending: set[Any]) -> None:
    """Remember the future of the request ``msg_id`` that was just handed to pygls, until done."""
    if msg_id is None:
        return
    future = lsp_adapter.request_future(protocol, msg_id)
    if future is not None and not future.done():
        pending.add(future)
        future.add_done_callback(pending.discard)


async def finish(protocol: JsonRPCProtocol, pending: set[Any], *, closed: bool) -> None:
    """Wait until every request in ``pending`` is done and its answer written. Nothing more will
    be read (the input ``closed``, or ``exit`` came), so the server's own requests
    (``workspace/configuration``) still unanswered never will be: they fail, so that whatever
    waits on them goes on instead of holding the exit forever."""
    if pending:
        why = "stdin closed" if closed else "exit received"
        log.warning("%s with %d request(s) not answered yet; finishing them", why, len(pending))
    while pending:
        lsp_adapter.fail_server_requests(
            protocol, ConnectionError("the client will not answer any more")
        )
        waiting = [asyncio.wrap_future(f) for f in list(pending)]
        if not waiting:  # the last one finished since the loop's test
            break
        await asyncio.wait(waiting)
        await asyncio.sleep(0)  # the answers are written by the futures' done callbacks


def read_frame(stdin: BinaryIO) -> tuple[int | None, bytes | None, bytes | None] | None:
    """``StdinReader.frame``'s blocking part: a header, then the body it announces unless it
    is missing, bad or longer than ``MAX_FRAME_BYTES``."""
    header = read_header(stdin)
    if header is None:
        return None
    length, bad_header = header
    if length is None or length > MAX_FRAME_BYTES:
        return length, bad_header, None
    return length, None, stdin.read(length)


def read_header(stdin: BinaryIO) -> tuple[int | None, bytes | None] | None:
    """Read header lines up to the blank line that ends a header holding ``Content-Length``."""
    length: int | None = None
    bad_header: bytes | None = None
    while True:
        line = stdin.readline(_MAX_HEADER_LINE)
        if not line:
            return None
        if line.strip() == b"":
            if length is not None or bad_header is not None:
                return length, bad_header
            continue  # a stray blank line between frames
        match = _CONTENT_LENGTH.search(line)
        if match is not None:
            length, bad_header = content_length(match.group(1))


def content_length(value: bytes) -> tuple[int | None, bytes | None]:
    """(length, None) for a header value of ASCII digits, else (None, value). Leading zeros are
    ignored, and a number too long to be a frame size counts as one byte over the frame limit
    (``int()`` of more than 4,300 digits raises, which used to end the server)."""
    if not value.isdigit():
        return None, value
    digits = value.lstrip(b"0")
    if len(digits) > len(str(MAX_FRAME_BYTES)):
        return MAX_FRAME_BYTES + 1, None
    return int(digits or b"0"), None
