"""Giving freed memory back to the operating system after large messages. The caches of rows are
bounded in bytes (``model.resident_bytes``), but glibc's allocator keeps what a large request
freed: after one 10 MB image is freed its mmap threshold rises, later large strings come from
the heaps of the threads that made them, and a freed heap shrinks only from its top. Paging
three conversations of 10 MB images then left ~550 MB resident with nothing referencing it
(``malloc_trim`` gave it back: 64 MB). So, shortly after a message of at least
``LARGE_BYTES`` was read or written — once the request's objects are gone — the heaps are
trimmed. Where the C library has no ``malloc_trim`` (macOS, Windows, musl) this does nothing:
those allocators return large blocks on their own."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("chat_history")

#: A message at least this large is followed by a trim.
LARGE_BYTES = 4 * 1024 * 1024
#: How long after it: the request's rows, its answer's chunks and the parsed request are freed
#: by then (the answer is written before its handler's frames unwind).
DELAY_SECONDS = 0.25


def _find_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_trim = _find_trim()
_lock = threading.Lock()
_pending = False


def large_message(size: int) -> None:
    """A message of ``size`` bytes was read or written (on the server's event loop): trim the
    heaps soon when it was large (one trim pending at a time)."""
    global _pending
    if size < LARGE_BYTES or _trim is None:
        return
    with _lock:
        if _pending:
            return
        _pending = True
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not the server's loop (an embedding test): nothing to wait on
        with _lock:
            _pending = False
        return
    # On the loop, not on a timer thread: a trim from a fresh thread gave nothing back.
    loop.call_later(DELAY_SECONDS, _run)


def _run() -> None:
    global _pending
    with _lock:
        _pending = False
    if _trim is not None:
        _trim(0)
