"""The custom methods' path: each ``chatHistory/*`` request of the wire's table (``wire/methods``,
looked up by name, each family loaded with its first request) run by the thread that read it
when the request thread is idle (``transport.serial``), else queued on the one request thread,
and answered from there: settings barrier, initialize gate, params structured, domain errors
mapped to codes, the change watch's notifications before the answer, ``$/cancelRequest`` of a
request that has not started. No pygls on this path (issue 45): a trivial request costs no
thread hop and no LSP typing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from chat_history.wire import protocol
from chat_history.wire.codes import (
    DOMAIN_ERRORS,
    SERVER_NOT_INITIALIZED,
    RpcError,
    to_jsonrpc,
)
from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import frames, memory
from chat_history.wire.transport.intake import Incoming

if TYPE_CHECKING:
    from chat_history.wire.methods.base import Method

log = logging.getLogger("chat_history")


class Job:
    """One request on the request thread: queued, then started, cancelled (``$/cancelRequest``)
    or refused (``shutdown`` came first), never two of them. A started request runs to the end
    and is answered with its result (protocol: a request is done or not done at all, so a client
    never retries a write that was committed)."""

    def __init__(self, msg_id: Any, has_id: bool, ticket: int, closing: threading.Event) -> None:
        self.msg_id = msg_id
        self.has_id = has_id
        self.ticket = ticket
        self._closing = closing
        self.state = "queued"
        self._lock = threading.Lock()
        #: done once the answer is written (or, for a notification, once it ran)
        self.done: Future[None] = Future()

    def start(self) -> bool:
        """Move a queued request to started, or to refused when the server is closing; returns
        whether it runs."""
        with self._lock:
            if self.state == "queued":
                self.state = "refused" if self._closing.is_set() else "started"
            return self.state == "started"

    def cancel(self) -> bool:
        """True when this call stopped a queued request (its answer is then the caller's to
        write); False when it already started or ended."""
        with self._lock:
            if self.state != "queued":
                return False
            self.state = "cancelled"
            return True

    def stopped(self) -> bool:
        """Whether the request will not run: cancelled, or the server is closing (a wait for
        settings ends early)."""
        return self.state == "cancelled" or self._closing.is_set()


class Requests:
    """The requests of the custom methods not yet answered, by id, and their one way through."""

    def __init__(self, ls: ChatHistoryServer, on_answer: Callable[[], None]) -> None:
        self.ls = ls
        self._on_answer = on_answer
        #: the methods of the families loaded so far, by name
        self._table: dict[str, Method] = {}
        self._jobs: dict[Any, Job] = {}
        self._lock = threading.Lock()

    def method(self, name: str) -> Method | None:
        """The method of that name in the wire's table: its family is imported with the first
        request for one of its methods (``initialize`` waits for none, the first
        ``listConversations`` only for its own)."""
        found = self._table.get(name)
        if found is None:
            from chat_history.wire import methods

            family = methods.FAMILY_OF.get(name)
            if family is None:
                return None
            for method in methods.family_methods(family):
                self._table[method.name] = method
            found = self._table.get(name)
        return found

    def submit(self, incoming: Incoming, method: Method) -> None:
        """Queue the request on the request thread, in arrival order: its ticket for the
        settings barrier is taken now, on the thread that read it."""
        ls = self.ls
        job = Job(incoming.msg_id, incoming.has_id, ls.barrier.ticket(), ls.closing)
        ls.in_flight.add(job.done)
        job.done.add_done_callback(ls.in_flight.discard)
        # Nothing queued or running and no settings to wait for: run it here, on the reading
        # thread, with no thread woken (no cancel of it can be read meanwhile, and a started
        # request runs to the end anyway).
        if (
            method.inline
            and ls.barrier.ready(job.ticket)
            and ls.requests.run_here(self._run, job, method, incoming.params)
        ):
            return
        if job.has_id:
            with self._lock:
                self._jobs[job.msg_id] = job
        ls.requests.submit(self._run, job, method, incoming.params)

    def cancel(self, msg_id: Any) -> bool:
        """``$/cancelRequest`` for ``msg_id``: a queued request is answered -32800 now and never
        runs; a started one is answered with its result. False when no such request is here."""
        if not (isinstance(msg_id, str) or type(msg_id) is int):
            return False
        with self._lock:
            job = self._jobs.get(msg_id)
        if job is None:
            return False
        if job.cancel():
            self.ls.barrier.wake()
            self._answer(job, error=RpcError.cancelled(msg_id))
        return True

    def _run(self, job: Job, method: Method, raw: Any) -> None:
        """The request thread: the settings in force, the gate, the method, the answer."""
        ls = self.ls
        try:
            settings = ls.barrier.settings_for(job.ticket, job.stopped)
            if not job.start():
                if job.state == "refused":
                    self._answer(job, error=RpcError.cancelled(job.msg_id))
                return  # cancelled: answered by the cancel
            manager = ls.manager
            if manager is None:
                raise RpcError(
                    SERVER_NOT_INITIALIZED,
                    f"{method.name}: the server is not initialized (send initialize first)",
                )
            manager = manager.under(settings)  # the request runs under its own settings
            ls.send_changes(poll=True)  # what others changed goes before this answer
            try:
                params: Any = protocol.structure(raw, method.params)
                ls.open_identity(manager, settings)
                result = method.run(manager, ls, params)
            except DOMAIN_ERRORS as exc:
                raise to_jsonrpc(exc) from None
            finally:
                ls.send_changes(poll=False)  # what this request's writes found others did
        except RpcError as exc:
            if exc.code not in protocol.EXPECTED_CODES:
                log.error("server error: %s", exc.message)
            self._answer(job, error=exc)
        except Exception as exc:
            log.exception('Exception occurred for message "%s"', job.msg_id)
            self._answer(job, error=RpcError.internal(exc))
        else:
            self._answer(job, result=result)

    def _answer(self, job: Job, result: Any = None, error: RpcError | None = None) -> None:
        """Write the answer now, from the calling thread (the writer's lock keeps frames whole);
        a notification's is not written."""
        try:
            writer = self.ls.writer
            if job.has_id and writer is not None:
                data: dict[str, Any] = (
                    {"jsonrpc": "2.0", "id": job.msg_id, "error": error.as_error()}
                    if error is not None
                    else {"id": job.msg_id, "jsonrpc": "2.0", "result": result}
                )
                body = frames.answer_body(data, frames.plain)
                del data, result
                if body is not None:
                    writer.write_frame(*body)
                    memory.large_message(sum(map(len, body)), self.ls.loop)
        finally:
            if job.has_id:
                with self._lock:
                    if self._jobs.get(job.msg_id) is job:
                        del self._jobs[job.msg_id]
            job.done.set_result(None)
            self._on_answer()
