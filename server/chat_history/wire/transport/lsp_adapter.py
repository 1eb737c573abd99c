"""The one module that reaches into pygls's private attributes (names with a leading underscore).
pygls 2.x has no public way to: write a message ourselves (UTF-8, size-checked), structure a
message with the protocol's converter without its traceback, see whether ``shutdown`` was
received, find a request's future, fail the server's own unanswered requests at exit, or start
the stdio loop with our own stop event. Every such reach is a function or an override here, and
``tests/unit/test_lsp_adapter.py`` pins the pygls versions they were checked with (pyproject.toml)
and that each attribute still exists with the expected kind."""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Sequence
from typing import Any

import cattrs
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)

from chat_history.wire.transport import frames, memory

log = logging.getLogger("chat_history")

#: pygls's private attributes this module relies on, with their kind: ``"method"`` (callable on
#: the class) or the type of the value on a fresh instance. The version test checks them.
PROTOCOL_PRIVATES: dict[str, str | type] = {
    "_send_data": "method",
    "_serialize_message": "method",
    "_send_response": "method",
    "_handle_request": "method",
    "_handle_notification": "method",
    "_handle_cancel_notification": "method",
    "_server": object,
    "_converter": cattrs.Converter,
    "_shutdown": bool,
    "_request_futures": dict,
    "_result_types": dict,
}
SERVER_PRIVATES: dict[str, str | type] = {"_stop_event": object}


def converter() -> cattrs.Converter:
    """lsprotocol's converter, but custom params and results stay plain JSON (no namedtuples)."""
    conv: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        conv.register_structure_hook(cls, lambda obj, cls: cls(**obj))
    # Outgoing: one level only. Our results are JSON already (a ~20 KB prepare body took a
    # cattrs walk as long as json.dumps itself); an lsprotocol object inside still reaches
    # this converter through json.dumps's ``default`` hook.
    conv.register_unstructure_hook(
        JsonRPCResponseMessage,
        lambda m: {"id": m.id, "jsonrpc": m.jsonrpc, "result": m.result},
    )
    conv.register_unstructure_hook(
        JsonRPCNotification,
        lambda m: {"method": m.method, "jsonrpc": m.jsonrpc, "params": m.params},
    )
    return conv


#: What a request handler returns when it has written its answer itself (``answer``).
ANSWERED = object()


class AdaptedProtocol(LanguageServerProtocol):
    """pygls's protocol with our writer, answers written by the thread that made them, and
    quieter routing of ``$/`` methods and late cancels."""

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: Any | None = None
    ) -> None:
        """pygls's answer, unless the handler already wrote it (``answer``)."""
        if result is ANSWERED and error is None:
            self._result_types.pop(msg_id, None)
            return
        super()._send_response(msg_id, result, error)

    @property
    def server(self) -> Any:
        """The server this protocol serves (pygls keeps it private)."""
        return self._server

    def _send_data(self, data: Any) -> None:
        """pygls's writer, but UTF-8 (pygls escapes every non-ASCII character, tripling emoji),
        a Content-Length in bytes, and an error answer for an answer that cannot be encoded or
        is too large (pygls logged those and never answered): see frames.answer_body."""
        if not data:
            return
        writer = self.writer
        if writer is None:
            log.error("Unable to send data, no available transport!")
            return
        body = frames.answer_body(data, self._serialize_message)
        if body is None:
            return
        size = sum(map(len, body))
        if isinstance(writer, frames.FrameWriter):
            writer.write_frame(*body)
        else:  # an embedding test's writer
            writer.write(b"".join([frames.frame_header(size), *body]))
        del body
        memory.large_message(size)

    def _known(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        # LSP: a `$/` request the server does not implement gets MethodNotFound, and that is
        # routine (clients probe with them), not an error for the log.
        if method_name.startswith("$/") and not self._known(method_name):
            log.debug("unknown request %s answered MethodNotFound", method_name[:100])
            error = JsonRpcMethodNotFound.of(method_name[:100]).to_response_error()
            self._send_response(msg_id, None, error)
            return
        super()._handle_request(msg_id, method_name, params)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        # LSP: `$/` notifications may be ignored.
        if (
            method_name.startswith("$/")
            and method_name != "$/cancelRequest"
            and not self._known(method_name)
        ):
            log.debug("ignored notification %s", method_name[:100])
            return
        super()._handle_notification(method_name, params)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # Cancelling a request that was already answered is an ordinary race, not news.
        if msg_id not in self._request_futures:
            log.debug("cancel for request %r, already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)


# -- what frames.py needs from a protocol ------------------------------------------------------


def send(protocol: JsonRPCProtocol, data: Any) -> None:
    """Write one message (a dict) through the protocol's writer."""
    protocol._send_data(data)


def answer(protocol: JsonRPCProtocol, msg_id: Any, result: Any) -> Any:
    """Write the answer to request ``msg_id`` now, from the calling thread (the writer's lock
    keeps frames whole); returns what the handler returns so that pygls does not answer again.
    Without an id (not called for a request) the result is returned for pygls to send."""
    if msg_id is None or not isinstance(protocol, AdaptedProtocol):
        return result
    LanguageServerProtocol._send_response(protocol, msg_id, result)
    return ANSWERED


def handle_message(protocol: JsonRPCProtocol, message: Any) -> None:
    """pygls's ``handle_message`` for a plain request or notification (a custom method's), in
    its own context as pygls runs it, without pygls's ``isinstance`` against its
    ``runtime_checkable`` protocols (~37 µs each at load 10 here, two for a notification:
    issue 36). Any other message, and every message once ``shutdown`` came, goes through
    pygls's own."""
    kind = type(message)
    if message.jsonrpc != JsonRPCProtocol.VERSION or protocol._shutdown:
        protocol.handle_message(message)
    elif kind is JsonRPCRequestMessage:
        context = contextvars.copy_context()
        context.run(protocol._handle_request, message.id, message.method, message.params)
    elif kind is JsonRPCNotification:
        context = contextvars.copy_context()
        context.run(protocol._handle_notification, message.method, message.params)
    else:
        protocol.handle_message(message)


def shutting_down(protocol: JsonRPCProtocol) -> bool:
    """Whether ``shutdown`` was received."""
    return bool(protocol._shutdown)


def structure_message(protocol: JsonRPCProtocol, message: dict[str, Any], cls: type) -> Any:
    """What pygls's ``structure_message`` does, without its traceback in the log for bad input."""
    return protocol._converter.structure(message, cls)


def request_future(protocol: JsonRPCProtocol, msg_id: Any) -> Any:
    """The future of a client request pygls is handling, if any."""
    return protocol._request_futures.get(msg_id)


def fail_server_request(protocol: JsonRPCProtocol, msg_id: Any, exc: BaseException) -> bool:
    """Fail the server's own request ``msg_id`` (its answer could not be read): whatever waits
    on it goes on as after an error answer. False when no such request is waiting."""
    if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
        return False
    protocol._result_types.pop(msg_id, None)
    future = protocol._request_futures.pop(msg_id, None)
    if not isinstance(future, concurrent.futures.Future) or future.done():
        return False
    future.set_exception(exc)
    return True


def fail_server_requests(protocol: JsonRPCProtocol, exc: BaseException) -> None:
    """Fail the server's own requests still waiting for the client's answer."""
    for msg_id in list(protocol._result_types):
        future = protocol._request_futures.pop(msg_id, None)
        if isinstance(future, concurrent.futures.Future) and not future.done():
            future.set_exception(exc)


# -- what the session (wire/session.py) needs from the language server -------------------------


def new_stop_event(server: LanguageServer) -> threading.Event:
    """The event pygls's ``shutdown`` sets to stop the stdio loop (``start_io`` makes it)."""
    server._stop_event = threading.Event()
    return server._stop_event


def notify_all(
    protocol: JsonRPCProtocol,
    writer: frames.FrameWriter | None,
    method: str,
    params: Sequence[Any],
) -> None:
    """Notifications written in one write (every write wakes the client); pygls's own path when
    not serving stdio (an embedding test)."""
    if writer is None:
        for one in params:
            protocol.notify(method, one)
        return
    parts: list[bytes] = []
    for one in params:
        body = frames.encode({"jsonrpc": "2.0", "method": method, "params": one}, repr)
        parts += [frames.frame_header(len(body)), body]
    writer.write_parts(*parts)
