"""The editor's end of ``chat-history acp``: our stdin and stdout as asyncio streams.

Where they are pipes, sockets or terminals on a POSIX system, the event loop reads and writes
them itself. Elsewhere, threads carry them: on Windows, where the proactor loop cannot take
an editor's anonymous pipes (the ACP SDK's ``stdio_streams`` does the same there), and where
either is a regular file (``chat-history acp -- AGENT < requests > answers``), which no loop
can watch."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import Protocol

from chat_history.acp import lines


class Writer(Protocol):
    """What a pipe writes through: asyncio's StreamWriter, or ``ThreadWriter``."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` to be written."""

    async def drain(self) -> None:
        """Wait until what was queued is written."""


class ThreadWriter:
    """Our stdout written by a thread of its own, in order; ``drain`` waits for what was written
    before it (so an editor that stops reading holds the writer back, not the loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: list[tuple[bytes, asyncio.Future[None]]] = []
        self.ready = threading.Condition()
        self.last: asyncio.Future[None] | None = None
        threading.Thread(target=self._run, name="acp-stdout", daemon=True).start()

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the writing thread (never blocks the loop)."""
        done: asyncio.Future[None] = self.loop.create_future()
        with self.ready:
            self.queue.append((data, done))
            self.ready.notify()
        self.last = done

    async def drain(self) -> None:
        """Wait until the thread has written everything queued so far."""
        if self.last is not None:
            await self.last

    def _run(self) -> None:
        out = sys.stdout.buffer
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                data, done = self.queue.pop(0)
            try:
                out.write(data)
                out.flush()
            except (OSError, ValueError):  # the editor is gone: what it would read is lost
                pass
            self.loop.call_soon_threadsafe(_settle, done)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _loop_can_watch(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    """Our stdin into ``reader``, from a thread: in chunks, so an over-long line is never held
    whole."""

    def run() -> None:
        fd = sys.stdin.fileno()
        try:
            while chunk := os.read(fd, lines.CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except (OSError, ValueError):
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=run, name="acp-stdin", daemon=True).start()


async def editor_streams() -> tuple[asyncio.StreamReader, Writer]:
    """Our stdin as a StreamReader and our stdout as a Writer."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=lines.CHUNK * 2)
    windows = sys.platform == "win32"
    if not windows and _loop_can_watch(sys.stdin.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:
        _feed(loop, reader)
    if not windows and _loop_can_watch(sys.stdout.fileno()):
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, sys.stdout
        )
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, ThreadWriter(loop)
