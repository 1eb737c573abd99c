"""The stdio message loop that replaces pygls's ``run_async``: LSP base framing read defensively,
and an answer for every request that can be answered (JSON-RPC 2.0, sections 4 and 5.1).

pygls 2.1.1 answers none of these, so the client waits forever: a body that is not JSON, not an
object, or nested deeper than Python's parser goes; a request without ``params`` (which JSON-RPC
allows) or with an unknown top-level member; a ``jsonrpc`` other than ``"2.0"``; an LSP request
whose params do not fit lsprotocol's type; a request after ``shutdown``. It also decodes every
nested object that holds a ``jsonrpc`` key as a message (so such metadata drops the request), dies
on a ``Content-Length`` too large to allocate, and loses every later frame after a header it cannot
read. Here a frame that cannot be parsed gets -32700 (id null), a message that is not a valid
request gets -32600, params that cannot be structured get -32602 naming the field, and the reader
resynchronises on the next ``Content-Length`` header.

The cost of every input is bounded (frame size, ``Content-Length`` digits, objects and arrays,
depth, method names, the id search), requests already received are finished before the server
exits (end of input, ``exit``), and answers are UTF-8 with an error in place of one that cannot
be encoded or is larger than ``MAX_ANSWER_BYTES``."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from concurrent.futures import Executor
from typing import Any, BinaryIO

import attrs
from pygls.protocol import JsonRPCNotification, JsonRPCProtocol, JsonRPCRequestMessage

from chat_history.errors import cut, shown
from chat_history.model import MAX_JSON_DEPTH, nesting_exceeds
from chat_history.wire import lsp_adapter, memory
from chat_history.wire.protocol import error_path

log = logging.getLogger("chat_history")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

#: The largest frame read into memory; a larger one is skipped (and answered when its id is found
#: near the start). Far above any valid request: an append holds at most 1,000 messages.
MAX_FRAME_BYTES = 256 * 1024 * 1024
#: JSON nesting accepted in a message (model.MAX_JSON_DEPTH).
MAX_DEPTH = MAX_JSON_DEPTH
#: The longest method name looked up: a longer one is answered -32601 with the name cut, before
#: pygls caches it (its lookups keep each name they saw) or repeats it in a log line.
MAX_METHOD_CHARS = 256
_MAX_HEADER_LINE = 8_192
#: JSON objects and arrays in one message: each costs ~100 bytes of memory and some work in every
#: check, so this bounds the cost of a message of many tiny objects (46 MB of ``{}`` took 53 s
#: and 1.3 GB before). A million is far more than 1,000 messages' metadata and arguments hold.
MAX_CONTAINERS = 1_000_000
#: Structural tokens ``top_level_id`` looks at before it gives up (a bounded search).
_ID_SEARCH_TOKENS = 100_000
_MAX_INT_DIGITS = 4_000  # below CPython's int_max_str_digits (4,300), which raises mid-parse

# Searched, not matched at the line start: after a frame whose Content-Length was wrong, the next
# header arrives glued to the leftover bytes of that body, and this finds it there.
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n?\Z", re.IGNORECASE)
_STRUCTURE = re.compile(rb'[][{}"]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: A JSON string, or an unclosed one up to the end: what ``containers_over`` removes (always a
#: match at a quote, so the scan is linear).
_STRING_OR_UNCLOSED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_EXIT = re.compile(rb'"method"\s*:\s*"exit"')
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d{1,18}|"[^"\\]*(?:\\.[^"\\]*)*")')


class StdinReader:
    """Blocking stdin reads on an executor, with a bounded header line."""

    def __init__(self, stdin: BinaryIO, executor: Executor | None) -> None:
        self.stdin = stdin
        self.executor = executor

    async def frame(self) -> tuple[int | None, bytes | None, bytes | None] | None:
        """The next frame: (length, None, body), or (None, the bad Content-Length value, None),
        or (length, None, None) for a frame longer than ``MAX_FRAME_BYTES`` (not read); None
        at the end of input. Header and body are read on the executor in one go: each hop to
        the executor and back wakes two threads, so the stray lines before a header cost a
        ``readline`` each, not a hop each (500,000 short lines took 40 s), and a request costs
        one hop to read, not two (issue 36)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, read_frame, self.stdin)

    async def peek(self) -> bytes:
        """What can be read without blocking for more (nothing is consumed)."""
        peek = getattr(self.stdin, "peek", None)
        if peek is None:
            return b""
        loop = asyncio.get_running_loop()
        head: bytes = await loop.run_in_executor(self.executor, peek, _MAX_HEADER_LINE)
        return head


async def serve(reader: StdinReader, protocol: JsonRPCProtocol, stop: threading.Event) -> None:
    """Read frames until end of input (or ``stop``), handing each body to ``handle_body``. Every
    request already received is finished (and answered while stdout is open) before this returns
    at the end of input, and before an ``exit`` notification is handled."""
    pending: set[Any] = set()
    while not stop.is_set():
        frame = await reader.frame()
        if frame is None:
            await finish(protocol, pending, closed=True)
            return
        length, bad_header, body = frame
        if length is None:
            send_error(
                protocol,
                None,
                PARSE_ERROR,
                f"Parse error: invalid Content-Length header {shown(bad_header)}; frame skipped",
            )
            continue
        if length > MAX_FRAME_BYTES:
            # Answered from the bytes already here, then skipped like any garbage until the next
            # header: a client whose header lies about the length still gets served afterwards.
            send_error(
                protocol,
                top_level_id(await reader.peek()),
                INVALID_REQUEST,
                f"Invalid Request: the message is longer than the limit of {MAX_FRAME_BYTES:,} "
                "bytes",
            )
            continue
        if body is None or len(body) < length:
            await finish(protocol, pending, closed=True)
            return  # end of input inside a frame
        if len(body) < 1_024 and _EXIT.search(body) and _method(body) == "exit":
            await finish(protocol, pending, closed=False)
        track(protocol, handle_body(protocol, body), pending)
        # Not kept while the request runs and this loop waits for the next header: the parsed
        # request, its answer's text and that text's bytes are alive then already.
        del body
        memory.large_message(length)


def _method(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data.get("method") if isinstance(data, dict) else None


def track(protocol: JsonRPCProtocol, msg_id: Any, pending: set[Any]) -> None:
    """Remember the future of the request ``msg_id`` that was just handed to pygls, until done."""
    if msg_id is None:
        return
    future = lsp_adapter.request_future(protocol, msg_id)
    if future is not None and not future.done():
        pending.add(future)
        future.add_done_callback(pending.discard)


async def finish(protocol: JsonRPCProtocol, pending: set[Any], *, closed: bool) -> None:
    """Wait until every request in ``pending`` is done and its answer written. Nothing more will
    be read (the input ``closed``, or ``exit`` came), so the server's own requests
    (``workspace/configuration``) still unanswered never will be: they fail, so that whatever
    waits on them goes on instead of holding the exit forever."""
    if pending:
        why = "stdin closed" if closed else "exit received"
        log.warning("%s with %d request(s) not answered yet; finishing them", why, len(pending))
    while pending:
        lsp_adapter.fail_server_requests(
            protocol, ConnectionError("the client will not answer any more")
        )
        waiting = [asyncio.wrap_future(f) for f in list(pending)]
        if not waiting:  # the last one finished since the loop's test
            break
        await asyncio.wait(waiting)
        await asyncio.sleep(0)  # the answers are written by the futures' done callbacks


def read_frame(stdin: BinaryIO) -> tuple[int | None, bytes | None, bytes | None] | None:
    """``StdinReader.frame``'s blocking part: a header, then the body it announces unless it
    is missing, bad or longer than ``MAX_FRAME_BYTES``."""
    header = read_header(stdin)
    if header is None:
        return None
    length, bad_header = header
    if length is None or length > MAX_FRAME_BYTES:
        return length, bad_header, None
    return length, None, stdin.read(length)


def read_header(stdin: BinaryIO) -> tuple[int | None, bytes | None] | None:
    """Read header lines up to the blank line that ends a header holding ``Content-Length``."""
    length: int | None = None
    bad_header: bytes | None = None
    while True:
        line = stdin.readline(_MAX_HEADER_LINE)
        if not line:
            return None
        if line.strip() == b"":
            if length is not None or bad_header is not None:
                return length, bad_header
            continue  # a stray blank line between frames
        match = _CONTENT_LENGTH.search(line)
        if match is not None:
            length, bad_header = content_length(match.group(1))


def content_length(value: bytes) -> tuple[int | None, bytes | None]:
    """(length, None) for a header value of ASCII digits, else (None, value). Leading zeros are
    ignored, and a number too long to be a frame size counts as one byte over the frame limit
    (``int()`` of more than 4,300 digits raises, which used to end the server)."""
    if not value.isdigit():
        return None, value
    digits = value.lstrip(b"0")
    if len(digits) > len(str(MAX_FRAME_BYTES)):
        return MAX_FRAME_BYTES + 1, None
    return int(digits or b"0"), None


def _parse_int(text: str) -> int | float:
    # A number too long for int() becomes ±inf, which every integer field refuses by name.
    return int(text) if len(text) <= _MAX_INT_DIGITS else float(text)


#: json.loads(body, parse_int=_parse_int) made a decoder per call (~2 µs); this is the same
#: decoding of bytes as json.loads does it, with one decoder.
_DECODER = json.JSONDecoder(parse_int=_parse_int)


def containers_over(body: bytes, limit: int = MAX_CONTAINERS) -> bool:
    """Whether the JSON text ``body`` holds more than ``limit`` objects and arrays, counted
    before parsing (outside strings) at the speed of ``bytes.count``."""
    if body.count(b"{") + body.count(b"[") <= limit:
        return False
    structure = _STRING_OR_UNCLOSED.sub(b"", body)
    return structure.count(b"{") + structure.count(b"[") > limit


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


def deepest_path(value: Any, limit: int) -> str | None:
    """The wire path (``messages[0].metadata``) of the first place where ``value`` nests deeper
    than ``limit``, cut to its first three steps; None when it does not."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            children: Any = ((f".{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            children = ((f"[{i}]", v) for i, v in enumerate(node))
        else:
            continue
        if depth > limit:
            return "".join(path[:3]).lstrip(".") or "params"
        for step, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, step) if len(path) < 3 else path))
    return None


def top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object, found without parsing the whole body (it is
    too deep, or too large, for the parser). Bounded: each byte is scanned once, an unclosed
    string ends the search (nothing after it can be a member name), and so do
    ``_ID_SEARCH_TOKENS`` brackets and strings without it."""
    depth = 0
    pos = 0
    for _ in range(_ID_SEARCH_TOKENS):
        token = _STRUCTURE.search(body, pos)
        if token is None:
            return None
        text = token.group()
        pos = token.end()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        else:
            string = _STRING_REST.match(body, pos)
            if string is None:
                return None
            pos = string.end()
            if depth == 1 and body[token.start() : pos] == b'"id"':
                value = _ID_VALUE.match(body, pos)
                if value is not None:
                    try:
                        found = json.loads(value.group(1))
                    except ValueError:
                        return None
                    return found if isinstance(found, int | str) else None
    return None


def send_error(
    protocol: JsonRPCProtocol, msg_id: Any, code: int, message: str, data: Any = None
) -> None:
    """Send a JSON-RPC error answer, and log it."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    log.info("answered %s: %s", code, message)
    lsp_adapter.send(protocol, {"jsonrpc": "2.0", "id": msg_id, "error": error})
