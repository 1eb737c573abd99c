"""The server's front on stdio (issue 45): one thread reads the frames (``transport/framing``)
and checks each message (``transport/intake``); ``initialize``, ``initialized``,
``workspace/didChangeConfiguration``, the ``chatHistory/*`` methods (``wire/requests``) and their
``$/cancelRequest`` are served here, on the session (``wire/session``), from the first message
on, while pygls loads in the background (``wire/lsp``). pygls keeps the rest of the LSP lifecycle:
``shutdown``, ``exit``, the settings pull once it has loaded, and whatever else an LSP client
sends; a message for it read before it has loaded is handed to it once it has, in order, without
holding up the messages read after it (``shutdown`` closes the session to requests that have not
started as soon as it is read; ``exit`` waits for pygls and for every request before it)."""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import sys
import threading
from typing import TYPE_CHECKING, Any, BinaryIO

from chat_history.errors import cut
from chat_history.settings import SECTION
from chat_history.wire import lifecycle
from chat_history.wire.codes import INTERNAL_ERROR, RpcError
from chat_history.wire.protocol import json_type
from chat_history.wire.requests import Requests
from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import frames, framing, intake, memory

if TYPE_CHECKING:
    import asyncio

    from chat_history.wire.lsp import ChatHistoryLanguageServer

log = logging.getLogger("chat_history")

#: The event loop (asyncio, ~15 % of the front's imports) and pygls start loading this long after
#: the front began reading, unless a custom request was answered before or a message needs them:
#: the first answers share the CPU with neither.
LSP_DELAY_SECONDS = 0.3
#: How long the reading thread waits for pygls to take a client's answer (the event loop is
#: ending when it does not).
ANSWER_WAIT_SECONDS = 5.0
#: The ids of the server's own requests before pygls has loaded (pygls's are UUIDs).
_ASKED_PREFIX = "chat-history-"


class Front:
    """The stdio server: what the read loop hands each frame to (``framing.Receiver``), the
    session it serves, and pygls once it has loaded."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.stdin = stdin
        self.writer = frames.FrameWriter(stdout)
        self.ls = ChatHistoryServer(self.writer)
        self.ls.ask_configuration = self.ask_configuration
        self.requests = Requests(self.ls, on_answer=self.want_lsp)
        #: pygls's language server, once loaded
        self.lsp: ChatHistoryLanguageServer | None = None
        #: pygls could not be loaded (a broken install)
        self._lsp_failed = False
        #: messages for pygls read before it has loaded, handed to it in order once it has
        self._for_lsp: list[intake.Incoming] = []
        self._lsp_lock = threading.Lock()
        self._loading = False
        self._loading_lock = threading.Lock()
        #: requests pygls is handling (``shutdown``): finished before the exit
        self._lsp_requests: set[Any] = set()
        #: the server's own requests before pygls loaded, by id, until answered
        self._asked: dict[str, concurrent.futures.Future[Any]] = {}
        self._ids = itertools.count(1)
        #: set on the event loop: the read loop's end (None, exit's body or its exception), and
        #: pygls loaded (or not)
        self._ended: asyncio.Future[Any] | None = None
        self._loaded: asyncio.Future[None] | None = None

    # -- framing.Receiver (the reading thread) ---------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        """Write one message of the front's own (an error answer, a request to the client)."""
        body = frames.answer_body(message, frames.plain)
        if body is not None:
            self.writer.write_frame(*body)

    def received(self, size: int) -> None:
        try:
            memory.large_message(size, self.ls.loop)
        except Exception:  # housekeeping never ends the read loop
            log.exception("after a message of %d bytes", size)

    def receive(self, body: bytes) -> None:
        """Check one message and route it: served here, or handed to pygls in order. Nothing
        that goes wrong here ends the server: a request is answered -32603."""
        checked = intake.check(self.send, body, self.shutting_down())
        del body
        if checked is None:
            return
        if isinstance(checked, dict):
            self._client_answer(checked)
            return
        try:
            self._route(checked)
        except Exception:
            log.exception("could not handle %s", checked.method)
            checked.refuse(self.send, INTERNAL_ERROR, f"Internal error handling {checked.method}")

    def _route(self, incoming: intake.Incoming) -> None:
        method = incoming.method
        if method.startswith("chatHistory/"):
            found = self.requests.method(method)
            if found is not None:
                self.requests.submit(incoming, found)
            elif incoming.has_id:
                intake.send_error(
                    self.send,
                    incoming.msg_id,
                    intake.METHOD_NOT_FOUND,
                    f"Method Not Found: {method}",
                )
            else:
                log.warning("Ignoring notification for unknown method %r", method)
            return
        if method == "initialize":
            self._initialize(incoming)
        elif method == "initialized":
            self._lifecycle(incoming, lifecycle.initialized)
        elif method == "workspace/didChangeConfiguration":
            self._lifecycle(incoming, lifecycle.did_change_configuration)
        elif not (method == "$/cancelRequest" and self._cancel(incoming)):
            if method == "shutdown" and incoming.has_id:
                # Requests read after it never start (they are answered -32800), whenever
                # pygls gets to it.
                self.ls.closing.set()
                self.ls.barrier.wake()
            self._to_lsp(incoming)

    def shutting_down(self) -> bool:
        """Whether pygls has handled ``shutdown`` (then only ``exit`` is taken)."""
        return self.lsp is not None and self.lsp.shutting_down()

    # -- served here -------------------------------------------------------------------------

    def _answer(self, msg_id: Any, result: Any = None, error: RpcError | None = None) -> None:
        if error is not None:
            self.send({"jsonrpc": "2.0", "id": msg_id, "error": error.as_error()})
        else:
            self.send({"id": msg_id, "jsonrpc": "2.0", "result": result})

    def _initialize(self, incoming: intake.Incoming) -> None:
        try:
            result = lifecycle.initialize(self.ls, incoming.params)
        except RpcError as exc:
            error: RpcError | None = exc
        except Exception as exc:
            log.exception("initialize failed")
            error = RpcError.internal(exc)
        else:
            error = None
        if incoming.has_id:
            self._answer(incoming.msg_id, None if error else result, error)

    def _lifecycle(self, incoming: intake.Incoming, handler: Any) -> None:
        try:
            handler(self.ls, incoming.params)
        except Exception as exc:
            log.exception("%s failed", incoming.method)
            if incoming.has_id:
                self._answer(incoming.msg_id, error=RpcError.internal(exc))
            return
        if incoming.has_id:
            self._answer(incoming.msg_id, None)

    def _cancel(self, incoming: intake.Incoming) -> bool:
        """A cancel of a custom request, handled; False for any other (pygls's, or none)."""
        params = incoming.params
        return isinstance(params, dict) and self.requests.cancel(params.get("id"))

    def _client_answer(self, data: dict[str, Any]) -> None:
        """A client's answer to a server request: the front's own, or pygls's."""
        if data.get("jsonrpc") != "2.0" or "id" not in data:
            log.warning("dropped a message that is neither a request nor a response")
            return
        msg_id = data["id"]
        future = self._asked.pop(msg_id, None) if isinstance(msg_id, str) else None
        if future is not None:
            _settle(future, data)
        elif self.lsp is not None:
            # Handed to pygls and waited for: what it resolves (the settings pull) is applied
            # before the next message is read.
            handled = threading.Event()
            self.ls.soon(_deliver_answer, self.lsp, data, handled)
            handled.wait(ANSWER_WAIT_SECONDS)
        else:
            log.warning("dropped a response to no request of the server's: %s", cut(str(msg_id)))

    def ask_configuration(self) -> concurrent.futures.Future[Any]:
        """``workspace/configuration`` for the ``chatHistory`` section, from any thread: through
        pygls once it has loaded, else written here (the first requests do not wait for pygls).
        Either way the answer resolves the future on the reading thread (``_client_answer``)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lsp_lock:
            lsp = self.lsp
        if lsp is not None:
            self.ls.soon(_ask_through, lsp, future)
            return future
        msg_id = f"{_ASKED_PREFIX}{next(self._ids)}"
        self._asked[msg_id] = future
        params = {"items": [{"section": SECTION}]}
        self.send(
            {"id": msg_id, "params": params, "method": "workspace/configuration", "jsonrpc": "2.0"}
        )
        return future

    # -- pygls -------------------------------------------------------------------------------

    def want_lsp(self) -> None:
        """Start loading pygls in the background (once), and the event loop it runs on."""
        self.ls.loop_wanted.set()
        with self._loading_lock:
            if self._loading:
                return
            self._loading = True
        threading.Thread(target=self._load, name="chat-history-lsp", daemon=True).start()

    def _load(self) -> None:
        try:
            from chat_history.wire import lsp
        except BaseException as exc:  # a broken install: said once, and exit ends the server
            log.critical("pygls could not be loaded: %r", exc)
            with self._lsp_lock:
                self._lsp_failed = True
                waiting, self._for_lsp = self._for_lsp, []
            for incoming in waiting:
                self._refuse(incoming)
            self.ls.soon(self._loaded_now, urgent=True)
            return
        self.ls.soon(self._install, lsp.ChatHistoryLanguageServer, urgent=True)

    def _install(self, make: type[ChatHistoryLanguageServer]) -> None:
        """pygls has loaded (on the event loop): the messages read for it meanwhile are handed to
        it now, in order, before any read later (those are scheduled after this)."""
        server = make(self.ls)
        with self._lsp_lock:
            self.lsp = server
            waiting, self._for_lsp = self._for_lsp, []
        for incoming in waiting:
            self._deliver(incoming)
        self._loaded_now()

    def _loaded_now(self) -> None:
        if self._loaded is not None and not self._loaded.done():
            self._loaded.set_result(None)

    def _to_lsp(self, incoming: intake.Incoming) -> None:
        """Hand the message to pygls on the event loop; before it has loaded, once it has (in
        order, and without holding up the messages read after it: ``shutdown`` has already
        closed the session to requests that had not started)."""
        with self._lsp_lock:
            ready, failed = self.lsp is not None, self._lsp_failed
            if not (ready or failed):
                self._for_lsp.append(incoming)
        if ready:
            self.ls.soon(self._deliver, incoming)
        elif failed:
            self._refuse(incoming)
        else:
            self.want_lsp()

    def _refuse(self, incoming: intake.Incoming) -> None:
        incoming.refuse(self.send, INTERNAL_ERROR, f"Internal error handling {incoming.method}")

    def _deliver(self, incoming: intake.Incoming) -> None:
        assert self.lsp is not None
        msg_id = self.lsp.deliver(incoming)
        if msg_id is not None:
            future = self.lsp.request_future(msg_id)
            if future is not None and not future.done():
                self._lsp_requests.add(future)
                future.add_done_callback(self._lsp_requests.discard)

    # -- the loop ----------------------------------------------------------------------------

    def start_reading(self) -> None:
        """The read loop on its own thread; its end (None, exit's body or the exception it
        raised) is handed to the event loop (``serve``)."""

        def read() -> None:
            try:
                found: Any = framing.read_loop(self.stdin, self)
            except BaseException as exc:
                found = exc
            self.ls.soon(self._read_ended, found, urgent=True)

        threading.Thread(target=read, name="chat-history-stdin", daemon=True).start()

    def _read_ended(self, found: Any) -> None:
        assert self._ended is not None, "serve() made it before the loop ran anything"
        _set(self._ended, found)

    async def serve(self) -> None:
        """On the event loop, once it is wanted: wait for the end of input or ``exit``; every
        request already received is finished (and answered while stdout is open) before this
        returns, and before ``exit`` is handled."""
        import asyncio

        loop = asyncio.get_running_loop()
        self._ended = loop.create_future()
        self._loaded = loop.create_future()
        self.ls.attach(loop)  # what the reading thread meant for the loop runs now
        exit_body = await self._ended
        if exit_body is not None:  # exit is pygls's, after what it was handed before (shutdown)
            self.want_lsp()
            await self._loaded
        await self.finish(closed=exit_body is None)
        if exit_body is None:
            return
        incoming = intake.check(self.send, exit_body, shutting_down=False)
        if self.lsp is None:
            raise SystemExit(0 if self.ls.closing.is_set() else 1)
        if isinstance(incoming, intake.Incoming):
            self.lsp.deliver(incoming)

    async def finish(self, *, closed: bool) -> None:
        """Wait until every request received is done and its answer written. Nothing more will
        be read (the input ``closed``, or ``exit`` came), so the server's own requests
        (``workspace/configuration``) still unanswered never will be: they fail, so that whatever
        waits on them goes on instead of holding the exit forever."""
        import asyncio

        pending = self._pending()
        if pending:
            why = "stdin closed" if closed else "exit received"
            log.warning("%s with %d request(s) not answered yet; finishing them", why, len(pending))
        while pending:
            gone = ConnectionError("the client will not answer any more")
            for msg_id in list(self._asked):
                future = self._asked.pop(msg_id, None)
                if future is not None and not future.done():
                    future.set_exception(gone)
            if self.lsp is not None:
                self.lsp.fail_server_requests(gone)
            await asyncio.wait([asyncio.wrap_future(f) for f in pending])
            await asyncio.sleep(0)  # pygls's answers are written by the futures' done callbacks
            pending = self._pending()

    def _pending(self) -> list[Any]:
        return [f for f in [*self.ls.in_flight, *self._lsp_requests] if not f.done()]

    def close(self) -> None:
        """pygls's own shutdown (its stop event, its thread pool), when it has loaded."""
        if self.lsp is not None:
            self.lsp.shutdown()  # type: ignore[no-untyped-call]


def _ask_through(lsp: ChatHistoryLanguageServer, future: concurrent.futures.Future[Any]) -> None:
    """The pull through pygls (on the event loop); its answer copied into ``future``."""
    try:
        asked = lsp.ask_configuration()
    except Exception as exc:
        future.set_exception(exc)
        return
    asked.add_done_callback(lambda done: _copy(done, future))


def _copy(done: concurrent.futures.Future[Any], into: concurrent.futures.Future[Any]) -> None:
    if into.done():
        return
    if done.cancelled():
        into.set_exception(ConnectionError("the request was cancelled"))
    elif (error := done.exception()) is not None:
        into.set_exception(error)
    else:
        into.set_result(done.result())


def _deliver_answer(
    lsp: ChatHistoryLanguageServer, data: dict[str, Any], handled: threading.Event
) -> None:
    try:
        lsp.deliver_answer(data)
    finally:
        handled.set()


def _set(future: asyncio.Future[Any], value: Any) -> None:
    if future.done():
        return
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)


def _settle(future: concurrent.futures.Future[Any], data: dict[str, Any]) -> None:
    """The client's answer to the front's own request: its result, an error, or one that
    cannot be read, which counts as an error answer."""
    error = data.get("error")
    if "error" in data:
        if (
            isinstance(error, dict)
            and type(error.get("code")) is int
            and isinstance(error.get("message"), str)
        ):
            future.set_exception(RpcError(error["code"], error["message"], error.get("data")))
            return
        got = cut(repr(error), 200)
        why = f"error: expected an object with an integer code and a message, got {got}"
    elif isinstance(data.get("result"), list):
        future.set_result(data["result"])
        return
    else:
        why = f"result: expected an array, got {json_type(data.get('result'))}"
    log.warning("a malformed answer to request %s counts as an error: %s", data.get("id"), why)
    future.set_exception(intake.MalformedAnswer(f"the answer could not be read ({why})"))


def serve_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> ChatHistoryServer:
    """Serve on stdio until ``exit`` or the end of input; the session, its ``exit_code`` set
    (``exit``: 0 after ``shutdown``, else 1, as LSP says)."""
    front = Front(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    ls = front.ls
    signalled = False
    try:
        front.start_reading()
        # The first answers need no event loop: it starts once they are out (with pygls), when
        # something needs it (the settings pull, a message for pygls, the end), or after a while.
        ls.loop_wanted.wait(LSP_DELAY_SECONDS)
        front.want_lsp()
        import asyncio

        asyncio.run(front.serve())
    except BrokenPipeError:
        log.error("the client closed the connection; shutting down")
    except KeyboardInterrupt:  # SIGTERM, SIGHUP (__main__) or Ctrl-C
        signalled = True
    except SystemExit as exc:  # `exit`: 0 after `shutdown`, else 1 (LSP)
        ls.exit_code = exc.code if isinstance(exc.code, int) else 1
    finally:
        ls.barrier.abandon()  # requests waiting for settings must not hold up the exit
        ls.release_replies()
        if signalled:
            ls.exit_at_once()
        ls.requests.shutdown(wait=True)  # what runs there ends (as a thread pool's at exit)
        front.close()
    return ls
