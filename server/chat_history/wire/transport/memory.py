"""Giving freed memory back to the operating system after large messages. The caches of rows are
bounded in bytes (``model.resident_bytes``), but glibc's allocator keeps what a large request
freed: after one 10 MB image is freed its mmap threshold rises, later large strings come from
the heaps of the threads that made them, and a freed heap shrinks only from its top. Paging
three conversations of 10 MB images then left ~550 MB resident with nothing referencing it
(``malloc_trim`` gave it back: 64 MB). So, shortly after a message of at least
``LARGE_BYTES`` was read or written — once the request's objects are gone — the heaps are
trimmed.

The same holds at rest after many ordinary requests: reading 64 conversations of 484 rows 8
times left ~160 MiB resident, half of it freed memory kept in the request thread's arena. So once
no message has been read or written for ``IDLE_SECONDS`` the server is at rest: the callback
set with ``on_rest`` runs (the manager shrinks its cache to its bound at rest) and the heaps are
trimmed, once per quiet spell (the next message arms it again). Where the C library has no
``malloc_trim`` (macOS, Windows, musl) the trim does nothing: those allocators return large
blocks on their own."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

log = logging.getLogger("chat_history")

#: A message at least this large is followed by a trim.
LARGE_BYTES = 4 * 1024 * 1024
#: How long after it: the request's rows, its answer's chunks and the parsed request are freed
#: by then (the answer is written before its handler's frames unwind).
DELAY_SECONDS = 0.25
#: Quiet this long (no message read or written) and the server is at rest: one trim.
IDLE_SECONDS = 2.0


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
_idle_armed = False  # a check for rest is scheduled
_last_message = 0.0  # time.monotonic() of the last message
#: trims done (the large-message and the idle ones), for tests and diagnostics
trims = 0
_rest: tuple[Callable[[], None], Executor] | None = None


def on_rest(callback: Callable[[], None], executor: Executor) -> None:
    """Each time the server comes to rest, run ``callback`` and then the trim on ``executor``
    (the request thread: queued behind requests, never beside one). One callback: the newest
    replaces the one before."""
    global _rest
    _rest = (callback, executor)


def large_message(size: int) -> None:
    """A message of ``size`` bytes was read or written (on the server's event loop; every
    message passes here): trim the heaps soon when it was large (one trim pending at a time),
    and once the server is at rest."""
    global _pending
    _arm_idle()
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


def _arm_idle() -> None:
    """Note the message; schedule the check for rest unless one is scheduled."""
    global _idle_armed, _last_message
    with _lock:
        _last_message = time.monotonic()
        if _idle_armed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (an embedding test): no rest to wait for
            return
        _idle_armed = True
    loop.call_later(IDLE_SECONDS, _idle_check, loop)


def _idle_check(loop: asyncio.AbstractEventLoop) -> None:
    """Trim when no message came for ``IDLE_SECONDS``; else look again when that is due."""
    global _idle_armed
    with _lock:
        quiet = time.monotonic() - _last_message
        if quiet < IDLE_SECONDS:
            loop.call_later(IDLE_SECONDS - quiet, _idle_check, loop)
            return
        _idle_armed = False
    if _rest is None:
        _trim_now()
        return
    callback, executor = _rest
    with contextlib.suppress(RuntimeError):  # the request thread is gone: exiting
        executor.submit(_rest_then_trim, callback)


def _rest_then_trim(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # housekeeping never fails the server
        log.exception("the work at rest failed")
    _trim_now()


def _run() -> None:
    global _pending
    with _lock:
        _pending = False
    _trim_now()


def _trim_now() -> None:
    global trims
    if _trim is not None:
        _trim(0)
        trims += 1
