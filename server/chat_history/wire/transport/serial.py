"""The request thread (issue 45): one thread runs the session's work in the order it was
submitted (requests, the change watch's idle look, the memory trim), and the thread that read a
request may run it itself when nothing else is queued or running (``run_here``). A request then
costs no wake-up of another thread: under load each wake-up cost more than the request's own
work. Either way one task runs at a time, in submission order, as on a one-worker
``ThreadPoolExecutor`` (which this replaces: it is a ``concurrent.futures.Executor``, so the event
loop's ``run_in_executor`` takes it)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Task = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class SerialRunner(Executor):
    """One task at a time, in submission order: on its own thread (started with the first
    ``submit``), or on the caller's (``run_here``) when none is queued or running."""

    def __init__(self, name: str = "chat-history") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._queued: collections.deque[_Task] = collections.deque()
        self._wake = threading.Condition(self._lock)
        #: tasks submitted (or run here) and not finished: run_here only at 0
        self._pending = 0
        #: held while a task runs, on whichever thread
        self._turn = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shut = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queue ``fn(*args, **kwargs)`` behind every task before it."""
        future: Future[T] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queued.append((future, fn, args, kwargs))
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            else:
                self._wake.notify()
        return future

    def run_here(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on this thread now, if no task is queued or running (then nothing
        submitted before it is left undone, and whatever is submitted meanwhile waits for it);
        False, having run nothing, otherwise. ``fn``'s exceptions are its own to handle: one that
        escapes is raised here."""
        with self._lock:
            if self._pending or self._shut:
                return False
            self._pending += 1
        try:
            with self._turn:
                fn(*args)
        finally:
            with self._lock:
                self._pending -= 1
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._shut:
                    self._wake.wait()
                if not self._queued:
                    return
                future, fn, args, kwargs = self._queued.popleft()
            try:
                with self._turn:
                    if future.set_running_or_notify_cancel():
                        try:
                            result = fn(*args, **kwargs)
                        except BaseException as exc:
                            future.set_exception(exc)
                        else:
                            future.set_result(result)
                    del future, fn, args, kwargs
            finally:
                with self._lock:
                    self._pending -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No task is taken after this; the queued ones still run (unless ``cancel_futures``),
        and with ``wait`` this returns once they have."""
        with self._lock:
            self._shut = True
            if cancel_futures:
                while self._queued:
                    self._queued.popleft()[0].cancel()
                    self._pending -= 1
            self._wake.notify_all()
            thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()
