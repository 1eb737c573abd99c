"""The pygls server: the one ``request`` helper that runs every method of ``wire/methods`` (its
table, ``METHODS``) on the request thread, and ``register``, which puts them and the lifecycle
(``wire/lifecycle``) on a session (``wire/session``). Domain errors become JSON-RPC errors here,
in one place (``wire/codes``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcServerNotInitialized

from chat_history.service.manager import ChatHistoryManager
from chat_history.wire import protocol
from chat_history.wire.codes import DOMAIN_ERRORS, to_jsonrpc
from chat_history.wire.lifecycle import did_change_configuration, initialize, initialized, shutdown
from chat_history.wire.methods import METHODS
from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import lsp_adapter

#: What the request thread returns for a request cancelled (or refused by ``shutdown``) before
#: it started: it did nothing. A value, not an exception: at exit nobody may be left to read it.
_NOT_RUN = object()


class Job:
    """One request on the request thread: queued, then started or cancelled, never both. A
    started request runs to the end and is answered with its result (protocol: a request is
    done or not done at all, so a client never retries a write that was committed)."""

    def __init__(self, ticket: int, closing: threading.Event) -> None:
        self.ticket = ticket
        self._closing = closing
        self._state = "queued"
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Move a queued request to started, unless it was cancelled or the server is closing;
        returns whether it runs."""
        with self._lock:
            if self._state == "queued" and not self._closing.is_set():
                self._state = "started"
            return self._state == "started"

    def cancel(self) -> bool:
        """True when the request will never run; False when it already started."""
        with self._lock:
            if self._state == "started":
                return False
            self._state = "cancelled"
            return True

    def stopped(self) -> bool:
        """Whether the request will not run: cancelled, or the server is closing (a wait for
        settings ends early)."""
        return self._state == "cancelled" or self._closing.is_set()


Handler = Callable[[ChatHistoryManager, ChatHistoryServer, Any], Any]


def request(ls: ChatHistoryServer, method: str, params_cls: type, body: Handler) -> None:
    """Register a handler run on the request thread: settings barrier, initialize gate, params
    structuring, error mapping."""

    @ls.feature(method)
    async def handler(ls: ChatHistoryServer, raw: Any) -> Any:
        # Ticket and submission before the first await: in the order the requests arrived.
        job = Job(ls.barrier.ticket(), ls.closing)
        done = asyncio.wrap_future(ls.requests.submit(run, ls, job, raw, ls.protocol.msg_id))
        task = asyncio.current_task()
        if task is not None:
            ls.in_flight.add(task)
            task.add_done_callback(ls.in_flight.discard)
        while True:
            try:
                result = await asyncio.shield(done)
            except asyncio.CancelledError:
                if job.cancel():
                    ls.barrier.wake()
                    raise
                continue  # started: it finishes, and its result is the answer
            if result is _NOT_RUN:
                raise asyncio.CancelledError
            return result

    def run(ls: ChatHistoryServer, job: Job, raw: Any, msg_id: Any) -> Any:
        settings = ls.barrier.settings_for(job.ticket, job.stopped)
        if not job.start():
            return _NOT_RUN
        manager = ls.manager
        if manager is None:
            raise JsonRpcServerNotInitialized(
                message=f"{method}: the server is not initialized (send initialize first)"
            )
        manager = manager.under(settings)  # the request runs under its own settings
        ls.send_changes(poll=True)  # what others changed goes before this answer
        try:
            params: Any = protocol.structure(raw, params_cls)
            ls.open_identity(manager, settings)
            result = body(manager, ls, params)
        except DOMAIN_ERRORS as exc:
            raise to_jsonrpc(exc) from None
        finally:
            ls.send_changes(poll=False)  # what this request's writes found others did
        # Written here, not by the event loop once it wakes for the result: the client has its
        # answer one thread hop sooner (issue 36); pygls is then told it was sent.
        return lsp_adapter.answer(ls.protocol, msg_id, result)


def register(ls: ChatHistoryServer) -> ChatHistoryServer:
    """The one place that registers every handler: the LSP lifecycle, then the custom methods."""
    ls.feature(types.INITIALIZE)(initialize)
    ls.feature(types.INITIALIZED)(initialized)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    ls.feature(types.SHUTDOWN)(shutdown)
    for method in METHODS:
        request(ls, method.name, method.params, method.run)
    return ls


server = register(ChatHistoryServer())
