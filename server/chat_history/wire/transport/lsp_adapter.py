"""The one module that reaches into pygls's private attributes (names with a leading underscore),
and the only one of the transport that imports pygls: the server's front (``wire/server.py``)
hands pygls the messages of the LSP lifecycle it keeps (``deliver``, ``deliver_answer``) once it
has loaded. pygls 2.x has no public way to: write a message ourselves (UTF-8, size-checked),
structure a message with the protocol's converter without its traceback, see whether
``shutdown`` was received, find a request's future, or fail the server's own unanswered requests
at exit. Every such reach is a function or an override
here, and ``tests/unit/test_lsp_adapter.py`` pins the pygls versions they were checked with
(pyproject.toml) and that each attribute still exists with the expected kind."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

import cattrs
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)

from chat_history.errors import cut, shown
from chat_history.wire.protocol import error_path
from chat_history.wire.transport import frames, memory
from chat_history.wire.transport.intake import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Incoming,
    MalformedAnswer,
    send_error,
)

log = logging.getLogger("chat_history")

#: pygls's private attributes this module relies on, with their kind: ``"method"`` (callable on
#: the class) or the type of the value on a fresh instance. The version test checks them.
PROTOCOL_PRIVATES: dict[str, str | type] = {
    "_send_data": "method",
    "_serialize_message": "method",
    "_handle_request": "method",
    "_handle_notification": "method",
    "_handle_cancel_notification": "method",
    "_server": object,
    "_converter": cattrs.Converter,
    "_shutdown": bool,
    "_request_futures": dict,
    "_result_types": dict,
}


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


class AdaptedProtocol(LanguageServerProtocol):
    """pygls's protocol with our writer and quieter routing of ``$/`` methods and late
    cancels."""

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
        memory.large_message(size, _loop_here())

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


# -- what the front hands pygls ----------------------------------------------------------------


def send(protocol: JsonRPCProtocol, data: Any) -> None:
    """Write one message (a dict) through the protocol's writer."""
    protocol._send_data(data)


def deliver(protocol: JsonRPCProtocol, incoming: Incoming) -> Any:
    """Structure a checked message as pygls's type for its method (params that do not fit it are
    -32602 naming the field) and hand it to pygls; the id of a request pygls now handles, else
    None."""
    structured = _structure(protocol, incoming)
    if structured is None:
        return None
    method = incoming.method
    try:
        protocol.handle_message(structured)
        return incoming.msg_id if incoming.has_id else None
    except Exception as exc:
        # pygls answers a request's own errors; what escapes is a notification it choked on
        # (a $/cancelRequest whose id is a list raises TypeError): never fatal to the server.
        if not incoming.has_id:
            log.warning("dropped a notification %s: %r", method, exc)
            return None
        log.exception("could not handle %s", method)
        send_error(
            _sender(protocol),
            incoming.answer_id,
            INTERNAL_ERROR,
            f"Internal error handling {method}",
        )
        return None


def _sender(protocol: JsonRPCProtocol) -> Any:
    return protocol._send_data


def _structure(protocol: JsonRPCProtocol, incoming: Incoming) -> Any:
    data, method, has_id = incoming.data, incoming.method, incoming.has_id
    message_type = protocol.get_message_type(method)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if has_id:
        message["id"] = incoming.msg_id
    if "params" in data or message_type is None:
        message["params"] = data.get("params")  # JSON-RPC lets a request omit params
    if message_type is None:
        message_type = JsonRPCRequestMessage if has_id else JsonRPCNotification
    try:
        # What pygls's ``structure_message`` does, without its traceback in the log.
        return protocol._converter.structure(message, message_type)
    except Exception as exc:
        field, why = error_path(exc, "")
        field = field.removeprefix("params").removeprefix(".") or "params"
        field, why = cut(field, 300), cut(why, 1_000)
        incoming.refuse(
            _sender(protocol), INVALID_PARAMS, f"Invalid params: {field}: {why}", {"field": field}
        )
        return None


def deliver_answer(protocol: JsonRPCProtocol, data: dict[str, Any]) -> None:
    """A client's answer to one of pygls's requests: never answered back. Every answer to a
    request the server is waiting on is an answer: one it cannot read fails that request (as an
    error answer would), so whatever waits on it goes on."""
    try:
        protocol.handle_message(protocol.structure_message(data))
    except Exception as exc:
        why = cut(f"{type(exc).__name__}: {exc}", 300)
        failure = MalformedAnswer(f"the answer could not be read ({why})")
        if fail_server_request(protocol, data.get("id"), failure):
            log.warning(
                "a malformed answer to request %s counts as an error: %s",
                shown(data.get("id")),
                why,
            )
        else:
            log.warning("dropped a response the server cannot read: %s", why)


def shutting_down(protocol: JsonRPCProtocol) -> bool:
    """Whether ``shutdown`` was received."""
    return bool(protocol._shutdown)


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


def _loop_here() -> asyncio.AbstractEventLoop | None:
    """The event loop of this thread (pygls writes on its loop), if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
