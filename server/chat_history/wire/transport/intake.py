"""One message from a frame, checked in steps and handed to pygls, or answered why it cannot be
handled (JSON-RPC 2.0, sections 4 and 5.1); the client's answers to the server's own requests.

pygls 2.1.1 answers none of these, so the client waits forever: a body that is not JSON, not an
object, or nested deeper than Python's parser goes; a request without ``params`` (which JSON-RPC
allows) or with an unknown top-level member; a ``jsonrpc`` other than ``"2.0"``; an LSP request
whose params do not fit lsprotocol's type; a request after ``shutdown``. It also decodes every
nested object that holds a ``jsonrpc`` key as a message (so such metadata drops the request).
Here a body that cannot be parsed gets -32700 (id null), a message that is not a valid request
gets -32600, and params that cannot be structured get -32602 naming the field.

The cost of every message is bounded (objects and arrays, depth, method names, the id search:
``scan``), and answers are UTF-8 with an error in place of one that cannot be encoded or is larger
than ``MAX_ANSWER_BYTES`` (``frames``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
from pygls.protocol import JsonRPCNotification, JsonRPCProtocol, JsonRPCRequestMessage

from chat_history.errors import cut, shown
from chat_history.model import MAX_JSON_DEPTH, nesting_exceeds
from chat_history.wire.protocol import error_path
from chat_history.wire.transport import lsp_adapter
from chat_history.wire.transport.scan import (
    MAX_CONTAINERS,
    containers_over,
    deepest_path,
    top_level_id,
)

log = logging.getLogger("chat_history")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

#: JSON nesting accepted in a message (model.MAX_JSON_DEPTH).
MAX_DEPTH = MAX_JSON_DEPTH
#: The longest method name looked up: a longer one is answered -32601 with the name cut, before
#: pygls caches it (its lookups keep each name they saw) or repeats it in a log line.
MAX_METHOD_CHARS = 256
_MAX_INT_DIGITS = 4_000  # below CPython's int_max_str_digits (4,300), which raises mid-parse


def _parse_int(text: str) -> int | float:
    # A number too long for int() becomes ±inf, which every integer field refuses by name.
    return int(text) if len(text) <= _MAX_INT_DIGITS else float(text)


#: json.loads(body, parse_int=_parse_int) made a decoder per call (~2 µs); this is the same
#: decoding of bytes as json.loads does it, with one decoder.
_DECODER = json.JSONDecoder(parse_int=_parse_int)


def handle_body(protocol: JsonRPCProtocol, body: bytes) -> Any:
    """Validate one message and hand it to pygls, or answer why it cannot be handled; the id of
    a request handed to pygls, else None."""
    data = parse_body(protocol, body)
    if data is None:
        return None
    if "method" not in data:
        _handle_response(protocol, data)
        return None
    incoming = Incoming.of(data)
    problem = envelope_problem(protocol, incoming)
    if problem is not None:
        incoming.refuse(protocol, *problem)
        return None
    if params_too_deep(protocol, incoming):
        return None
    structured = structure_message(protocol, incoming)
    if structured is None:
        return None
    return dispatch(protocol, incoming, structured)


def parse_body(protocol: JsonRPCProtocol, body: bytes) -> dict[str, Any] | None:
    """Step 1: the body as a JSON object, bounded in containers and depth; None when it was
    answered (or dropped) instead."""
    if containers_over(body):
        msg_id = top_level_id(body)
        what = f"holds more than {MAX_CONTAINERS:,} JSON objects and arrays"
        if msg_id is None:
            send_error(protocol, None, INVALID_REQUEST, f"Invalid Request: the message {what}")
        else:
            error_data = {"field": "params"}
            send_error(
                protocol, msg_id, INVALID_PARAMS, f"Invalid params: params: {what}", error_data
            )
        return None
    try:
        data = _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))
    except RecursionError:
        too_deep(protocol, top_level_id(body), "params")
        return None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        send_error(protocol, None, PARSE_ERROR, f"Parse error: {exc}")
        return None
    if not isinstance(data, dict):
        send_error(
            protocol,
            None,
            INVALID_REQUEST,
            "Invalid Request: a message must be a JSON object (batches are not supported)",
        )
        return None
    return data


@attrs.frozen
class Incoming:
    """A request or notification as received: its id (``answer_id`` is the id an error answer
    may carry: null when the id itself is invalid)."""

    data: dict[str, Any]
    method: Any
    has_id: bool
    msg_id: Any
    id_ok: bool

    @classmethod
    def of(cls, data: dict[str, Any]) -> Incoming:
        """The message's method and id, and whether the id is one an answer may carry (a string or
        an integer)."""
        msg_id = data.get("id")
        id_ok = isinstance(msg_id, str) or (
            isinstance(msg_id, int) and not isinstance(msg_id, bool)
        )
        return cls(data, data["method"], "id" in data, msg_id, id_ok)

    @property
    def answer_id(self) -> Any:
        """The id an error answer carries: null when the message's own id is invalid."""
        return self.msg_id if self.id_ok else None

    def refuse(
        self, protocol: JsonRPCProtocol, code: int, message: str, error_data: Any = None
    ) -> None:
        """Answer a request with an error; a notification is dropped with a log line."""
        if self.has_id:
            send_error(protocol, self.answer_id, code, message, error_data)
        else:
            log.warning("dropped a notification: %s", message)


def envelope_problem(protocol: JsonRPCProtocol, incoming: Incoming) -> tuple[int, str] | None:
    """Step 2: what is wrong with the message's members other than params, as (code, message)."""
    method = incoming.method
    if incoming.data.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'
    if not isinstance(method, str):
        return INVALID_REQUEST, 'Invalid Request: "method" must be a string'
    if len(method) > MAX_METHOD_CHARS:
        return METHOD_NOT_FOUND, f"Method not found: {shown(method)}"
    if incoming.has_id and not incoming.id_ok:
        return INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'
    if lsp_adapter.shutting_down(protocol) and method != "exit":
        return INVALID_REQUEST, "Invalid Request: the server is shutting down"
    return None


def params_too_deep(protocol: JsonRPCProtocol, incoming: Incoming) -> bool:
    """Step 3: params nested deeper than ``MAX_DEPTH`` (a request is answered naming where)."""
    params = incoming.data.get("params")
    deep = deepest_path(params, MAX_DEPTH) if nesting_exceeds(params, MAX_DEPTH) else None
    if deep is None:
        return False
    if incoming.has_id:
        too_deep(protocol, incoming.answer_id, deep)
    return True


def structure_message(protocol: JsonRPCProtocol, incoming: Incoming) -> Any:
    """Step 4: the message as pygls's type for its method; None when refused as -32602."""
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
        return lsp_adapter.structure_message(protocol, message, message_type)
    except Exception as exc:
        field, why = error_path(exc, "")
        field = field.removeprefix("params").removeprefix(".") or "params"
        field, why = cut(field, 300), cut(why, 1_000)
        incoming.refuse(
            protocol, INVALID_PARAMS, f"Invalid params: {field}: {why}", {"field": field}
        )
        return None


def dispatch(protocol: JsonRPCProtocol, incoming: Incoming, structured: Any) -> Any:
    """Step 5: hand the message to pygls; the request's id, else None."""
    method = incoming.method
    try:
        lsp_adapter.handle_message(protocol, structured)
        return incoming.msg_id if incoming.has_id else None
    except Exception as exc:
        # pygls answers a request's own errors; what escapes is a notification it choked on
        # (a $/cancelRequest whose id is a list raises TypeError): never fatal to the server.
        if not incoming.has_id:
            log.warning("dropped a notification %s: %r", method, exc)
            return None
        log.exception("could not handle %s", method)
        send_error(
            protocol, incoming.answer_id, INTERNAL_ERROR, f"Internal error handling {method}"
        )
        return None


class MalformedAnswer(Exception):
    """The client's answer to a server request could not be read (``{"result": 42}`` to
    ``workspace/configuration``, an error without ``message``): it counts as an error answer."""


def _handle_response(protocol: JsonRPCProtocol, data: dict[str, Any]) -> None:
    """A client's answer to a server request (workspace/configuration): never answered back.
    Every answer to a request the server is waiting on is an answer: one it cannot read fails
    that request (as an error answer would), so whatever waits on it goes on."""
    if data.get("jsonrpc") != "2.0" or "id" not in data:
        log.warning("dropped a message that is neither a request nor a response")
        return
    try:
        protocol.handle_message(protocol.structure_message(data))
    except Exception as exc:
        why = cut(f"{type(exc).__name__}: {exc}", 300)
        failure = MalformedAnswer(f"the answer could not be read ({why})")
        if lsp_adapter.fail_server_request(protocol, data.get("id"), failure):
            log.warning(
                "a malformed answer to request %s counts as an error: %s",
                shown(data.get("id")),
                why,
            )
        else:
            log.warning("dropped a response the server cannot read: %s", why)


def too_deep(protocol: JsonRPCProtocol, msg_id: Any, field: str) -> None:
    """Answer a message nested too deeply to read: a parse error without its id, else InvalidParams
    naming ``field``."""
    if msg_id is None:
        send_error(protocol, None, PARSE_ERROR, "Parse error: the message is nested too deeply")
        return
    send_error(
        protocol,
        msg_id,
        INVALID_PARAMS,
        f"Invalid params: {field}: nested deeper than {MAX_DEPTH} levels",
        {"field": field},
    )


def send_error(
    protocol: JsonRPCProtocol, msg_id: Any, code: int, message: str, data: Any = None
) -> None:
    """Send a JSON-RPC error answer, and log it."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    log.info("answered %s: %s", code, message)
    lsp_adapter.send(protocol, {"jsonrpc": "2.0", "id": msg_id, "error": error})
