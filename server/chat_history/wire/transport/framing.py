"""The stdio read loop: LSP base framing read defensively on one thread, and every message's body
handed to a ``Receiver`` (the server's front, wire/server.py) on that thread, which answers every
request that can be answered (JSON-RPC 2.0, sections 4 and 5.1).

pygls 2.1.1 dies on a ``Content-Length`` too large to allocate and loses every later frame after a
header it cannot read. Here a header that cannot be read gets -32700 (id null), a frame longer
than ``MAX_FRAME_BYTES`` is answered from the bytes already read (``scan.top_level_id``) and
skipped, and the reader resynchronises on the next ``Content-Length`` header.

The cost of every input is bounded (frame size, ``Content-Length`` digits, the header line). The
loop ends at the end of input or at ``exit``, which it returns unhandled: the front finishes the
requests already received before it handles ``exit``."""

from __future__ import annotations

import json
import re
from typing import Any, BinaryIO, Protocol

from chat_history.errors import shown
from chat_history.wire.transport.intake import INVALID_REQUEST, PARSE_ERROR, send_error
from chat_history.wire.transport.scan import top_level_id

#: The largest frame read into memory; a larger one is skipped (and answered when its id is found
#: near the start). Far above any valid request: an append holds at most 1,000 messages.
MAX_FRAME_BYTES = 256 * 1024 * 1024
_MAX_HEADER_LINE = 8_192

# Searched, not matched at the line start: after a frame whose Content-Length was wrong, the next
# header arrives glued to the leftover bytes of that body, and this finds it there.
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n?\Z", re.IGNORECASE)
_EXIT = re.compile(rb'"method"\s*:\s*"exit"')


class Receiver(Protocol):
    """What the read loop hands each frame to (on the reading thread)."""

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (an error answer of the framing's own)."""
        ...

    def receive(self, body: bytes) -> None:
        """Handle one frame's body."""
        ...

    def received(self, size: int) -> None:
        """A frame of ``size`` bytes was read and its body let go (memory.large_message)."""
        ...


def read_loop(stdin: BinaryIO, receiver: Receiver) -> bytes | None:
    """Read frames until the end of input (None) or an ``exit`` notification (its body,
    not handed to ``receiver``), handing every other body to ``receiver.receive``. One thread
    reads and hands on: a request costs no hop to an event loop before it is dispatched."""
    while True:
        frame = read_frame(stdin)
        if frame is None:
            return None
        length, bad_header, body = frame
        if length is None:
            send_error(
                receiver.send,
                None,
                PARSE_ERROR,
                f"Parse error: invalid Content-Length header {shown(bad_header)}; frame skipped",
            )
            continue
        if length > MAX_FRAME_BYTES:
            # Answered from the bytes already here, then skipped like any garbage until the next
            # header: a client whose header lies about the length still gets served afterwards.
            send_error(
                receiver.send,
                top_level_id(peek(stdin)),
                INVALID_REQUEST,
                f"Invalid Request: the message is longer than the limit of {MAX_FRAME_BYTES:,} "
                "bytes",
            )
            continue
        if body is None or len(body) < length:
            return None  # end of input inside a frame
        if len(body) < 1_024 and _EXIT.search(body) and _method(body) == "exit":
            return body
        receiver.receive(body)
        # Not kept while the request runs and this loop waits for the next header: the parsed
        # request, its answer's text and that text's bytes are alive then already.
        del body
        receiver.received(length)


def peek(stdin: BinaryIO) -> bytes:
    """What can be read without blocking for more (nothing is consumed)."""
    looking = getattr(stdin, "peek", None)
    return looking(_MAX_HEADER_LINE) if looking is not None else b""


def _method(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data.get("method") if isinstance(data, dict) else None


def read_frame(stdin: BinaryIO) -> tuple[int | None, bytes | None, bytes | None] | None:
    """(length, None, body), or (None, the bad Content-Length value, None), or (length, None,
    None) for a frame longer than ``MAX_FRAME_BYTES`` (not read); None at the end of input.
    Header and body are read in one go: the stray lines before a header cost a ``readline``
    each (500,000 short lines took 40 s when each was a hop to an event loop)."""
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
