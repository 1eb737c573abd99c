"""Newline-delimited JSON-RPC read defensively: whole lines up to ``max_line`` bytes are parsed;
a longer line is handed on in pieces as it arrives (never held whole), and a line that is not a
JSON object is reported as garbage. Nothing here blocks on a line that never ends: the pieces of
an over-long one flow as they come."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs

#: Lines longer than this pass through in pieces, unparsed (bytes).
MAX_LINE = 16 * 1024 * 1024
CHUNK = 256 * 1024


@attrs.frozen
class Frame:
    """A whole line (``message``: its JSON object, None when it is not one), or a piece of an
    over-long line (``piece``; ``last`` on the piece that ends it)."""

    data: bytes
    message: dict[str, Any] | None = None
    piece: bool = False
    last: bool = False


def parse(line: bytes) -> dict[str, Any] | None:
    """The JSON object of ``line``, else None."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


async def frames(reader: asyncio.StreamReader, max_line: int = MAX_LINE) -> AsyncIterator[Frame]:
    """The frames of ``reader`` until it ends (a last unterminated line counts as a line)."""
    buffer = bytearray()
    streaming = False  # in the middle of an over-long line
    while True:
        chunk = await reader.read(CHUNK)
        if not chunk:
            break
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if streaming:
                if end < 0:
                    yield Frame(bytes(buffer), piece=True)
                    buffer.clear()
                    break
                yield Frame(bytes(buffer[: end + 1]), piece=True, last=True)
                del buffer[: end + 1]
                streaming = False
                continue
            if end < 0:
                if len(buffer) > max_line:
                    streaming = True
                    yield Frame(bytes(buffer), piece=True)
                    buffer.clear()
                break
            line = bytes(buffer[: end + 1])
            del buffer[: end + 1]
            if len(line) > max_line + 1:
                yield Frame(line, piece=True, last=True)
            elif line.strip():
                yield Frame(line, parse(line))
    if streaming:
        yield Frame(bytes(buffer) + b"\n", piece=True, last=True)
    elif buffer.strip():
        yield Frame(bytes(buffer) + b"\n", parse(bytes(buffer)))


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
