"""Writing LSP base frames: UTF-8 JSON bodies with a Content-Length in bytes, one lock per
stdout, and an error answer in place of one that cannot be encoded or is larger than
``MAX_ANSWER_BYTES``; notifications and requests of the server's own. No pygls here (framing.py
reads; lsp_adapter.py plugs this writer into pygls)."""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, Generic, TypeVar

from chat_history.errors import cut, shown
from chat_history.model import JsonText

log = logging.getLogger("chat_history")

T = TypeVar("T")

INTERNAL_ERROR = -32603
#: The largest answer written. Bodies are UTF-8, and a JSON text of N bytes decodes to at most N
#: UTF-16 code units, so a client on Node/V8 (longest string: 2**29 - 24 units) can always read
#: one. Every valid append's answer fits: it echoes what the request sent (at most
#: MAX_FRAME_BYTES), plus ~200 bytes per stored row and a few bytes per re-encoded number.
#: A larger answer (``get`` without ``limit`` of a huge history) is an error that says to page.
MAX_ANSWER_BYTES = 384 * 1024 * 1024

_HEADER = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"


def frame_header(size: int) -> bytes:
    """The LSP base-protocol header of a body of ``size`` bytes."""
    return _HEADER % size


#: A frame at most this long is written in one call: with an unbuffered stdout
#: (PYTHONUNBUFFERED, which editors and CI set) each part was a system call of its own, and the
#: client woke up for the header alone.
_JOINED_BYTES = 64 * 1024


class FrameWriter:
    """stdout for pygls and for frames written directly: one lock, so the header and body of a
    frame written from one thread are never split by another's; once the client has closed
    stdout, later writes are dropped (the work behind them still completes)."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        """Close stdout; later writes are dropped."""
        with self._lock:
            self._stdout.close()

    def write(self, data: bytes) -> None:
        """Write one whole frame."""
        self.write_parts(data)

    def write_frame(self, *body: bytes) -> None:
        """One frame whose body is ``body``'s chunks, its Content-Length their total size."""
        self.write_parts(frame_header(sum(map(len, body))), *body)

    def write_parts(self, *parts: bytes) -> None:
        """Write a frame's parts as one unit (no other frame in between) and flush; once the client
        has gone, writes are dropped."""
        with self._lock:
            if self.closed:
                return
            try:
                if len(parts) > 1 and sum(map(len, parts)) <= _JOINED_BYTES:
                    parts = (b"".join(parts),)  # one write: stdout may be unbuffered (-u)
                for part in parts:
                    self._stdout.write(part)
                self._stdout.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:  # ValueError: closed file
                self.closed = True
                log.warning("the client closed stdout (%s); later answers are dropped", exc)


class JsonArray(Generic[T]):
    """A JSON array whose elements are made while it is written: ``convert`` of each of
    ``items``. An answer listing many rows then holds the rows, not also a dict per row."""

    __slots__ = ("convert", "items")

    def __init__(self, items: Iterable[T], convert: Callable[[T], Any]) -> None:
        self.items = items
        self.convert = convert

    def __iter__(self) -> Iterator[Any]:
        return map(self.convert, self.items)


def _with_arrays(default: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``default``, and a JsonArray (met where the answer is encoded whole) as a list, a
    JsonText as its value (where a message is encoded whole: ``encode_chunks`` writes its text
    as is)."""

    def convert(value: Any) -> Any:
        if isinstance(value, JsonArray):
            return list(value)
        if isinstance(value, JsonText):
            return value.value()
        return default(value)

    return convert


def _holds_text(item: Any) -> bool:
    """Whether an array element is an object with a JsonText member: walked, so that the text
    is written as is, not parsed for the C encoder."""
    return type(item) is dict and any(type(v) is JsonText for v in item.values())


def encode(data: Any, default: Callable[[Any], Any]) -> bytes:
    """One message as compact UTF-8 JSON (non-ASCII as is, not six-byte escapes). A lone
    surrogate, which only a string can hold, becomes its six-character escape (``\\udc80``)."""
    text = json.dumps(
        data, default=_with_arrays(default), ensure_ascii=False, separators=(",", ":")
    )
    return text.encode("utf-8", "backslashreplace")


#: Dicts this close to the message are written key by key; deeper values, and every element of
#: an array, are encoded whole (one C-encoder call each: a stored row, a provider message).
_WALKED_DEPTH = 4
#: Encoded text is turned into UTF-8 in pieces of about this many characters.
_CHUNK_CHARS = 256 * 1024


#: json's own string encoder (C when available), as json.dumps uses with ensure_ascii=False
_string: Callable[[str], str] = json.encoder.encode_basestring


def encode_chunks(data: Any, default: Callable[[Any], Any]) -> list[bytes]:
    """``encode(data, default)`` in chunks, byte for byte the same once joined, without the
    whole answer ever being one ``str`` and one ``bytes``: the top of the message (the answer's
    dicts and arrays) is walked, and each array element (a stored row, a provider message; a
    JsonArray's made only then) is encoded alone and turned into UTF-8 at once. So a ``get`` of
    a 100 MB history holds the rows and ~100 MB of chunks, not also a dict per row, a 100 MB
    ``str`` and 100 MB of bytes. Raises what ``json.dumps`` raises (ValueError, TypeError,
    RecursionError, MemoryError)."""
    plain = data if isinstance(data, _PLAIN) else default(data)  # the message's own object
    if _is_small(plain):
        return [encode(plain, default)]
    writer = _ChunkWriter(_with_arrays(default))
    writer.walk(plain, 0)
    writer.flush()
    return writer.chunks


_PLAIN = (dict, list, tuple, str, int, float, type(None))
#: An answer of at most this many JSON values and characters of strings is encoded in one
#: C-encoder call: walking it cost three times that (a trivial answer: ~55 vs ~18 µs at load 10,
#: issue 36), and the walk's point, never holding a huge answer twice, does not arise.
_SMALL_VALUES = 512
_SMALL_CHARS = 64 * 1024


def _is_small(value: Any) -> bool:
    """Whether ``value`` is plain JSON (dicts with string keys, lists, strings, numbers, null)
    of at most ``_SMALL_VALUES`` values and ``_SMALL_CHARS`` characters: no JsonText or
    JsonArray, nothing ``default`` must convert. Stops as soon as either bound is passed, so a
    huge (or circular) answer costs ``_SMALL_VALUES`` steps here."""
    values = chars = 0
    stack = [value]
    while stack:
        item = stack.pop()
        values += 1
        if values > _SMALL_VALUES:
            return False
        kind = type(item)
        if kind is str:
            chars += len(item)
        elif kind is dict:
            if values + len(item) > _SMALL_VALUES:
                return False
            for key in item:
                if type(key) is not str:
                    return False
                chars += len(key)
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            if values + len(item) > _SMALL_VALUES:
                return False
            stack.extend(item)
        elif not (item is None or kind is int or kind is float or kind is bool):
            return False
        if chars > _SMALL_CHARS:
            return False
    return True


class _ChunkWriter:
    """``encode_chunks``'s state: the chunks made, the text not yet turned into one, and the ids
    of the containers (and default-converted objects) on the walked path, as the C encoder's
    check_circular keeps them."""

    def __init__(self, default: Callable[[Any], Any]) -> None:
        self.default = default
        self.encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=default)
        self.chunks: list[bytes] = []
        self.pending: list[str] = []
        self.pending_chars = 0
        self.path: set[int] = set()

    def flush(self) -> None:
        if self.pending:
            self.chunks.append("".join(self.pending).encode("utf-8", "backslashreplace"))
            self.pending.clear()
            self.pending_chars = 0

    def put(self, text: str) -> None:
        if len(text) >= _CHUNK_CHARS:  # a large element: no join copying it again
            self.flush()
            self.chunks.append(text.encode("utf-8", "backslashreplace"))
            return
        self.pending.append(text)
        self.pending_chars += len(text)
        if self.pending_chars >= _CHUNK_CHARS:
            self.flush()

    def enter(self, value: Any) -> None:
        if id(value) in self.path:
            raise ValueError("Circular reference detected")
        self.path.add(id(value))

    def walk(self, value: Any, depth: int) -> None:
        put = self.put
        if isinstance(value, str):
            put(_string(value))
        elif isinstance(value, JsonText):
            put(value.text)
        elif value is None or isinstance(value, int | float):
            put(self.encoder.encode(value))
        elif isinstance(value, list | tuple | JsonArray):
            self.array(value, depth)
        elif isinstance(value, dict):
            if depth >= _WALKED_DEPTH or not all(isinstance(k, str) for k in value):
                put(self.encoder.encode(value))  # non-string keys: json's own conversion
                return
            self.enter(value)
            put("{")
            for i, (key, item) in enumerate(value.items()):
                put(f"{',' if i else ''}{_string(key)}:")
                self.walk(item, depth + 1)
            put("}")
            self.path.discard(id(value))
        else:
            self.enter(value)
            self.walk(self.default(value), depth)
            self.path.discard(id(value))

    def array(self, value: Any, depth: int) -> None:
        """Each element encoded alone (a JsonArray's made only now); an object holding a
        JsonText walked, so that its text is written as is."""
        put, encode = self.put, self.encoder.encode
        self.enter(value)
        put("[")
        for i, item in enumerate(value):
            if i:
                put(",")
            if _holds_text(item):
                self.walk(item, min(depth + 1, _WALKED_DEPTH - 1))
            else:
                put(encode(item))
        put("]")
        self.path.discard(id(value))


def answer_body(data: Any, default: Callable[[Any], Any]) -> list[bytes] | None:
    """The body of a message to send, in chunks (``encode_chunks``); for an answer that cannot
    be encoded or is larger than ``MAX_ANSWER_BYTES``, an error answer under its id instead, so
    that no request goes unanswered. None when a message that is not an answer cannot be sent."""
    msg_id = getattr(data, "id", None) if not isinstance(data, dict) else data.get("id")
    is_answer = (
        hasattr(data, "result")
        or hasattr(data, "error")
        or (isinstance(data, dict) and ("result" in data or "error" in data))
    )
    try:
        chunks = encode_chunks(data, default)
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        log.error("could not encode a message (id %s): %s", shown(msg_id), cut(repr(exc)))
        if not is_answer:
            return None
        reason = "nested too deeply" if isinstance(exc, RecursionError) else cut(str(exc))
        return [
            error_body(
                msg_id, INTERNAL_ERROR, f"Internal error: the answer cannot be sent ({reason})"
            )
        ]
    size = sum(map(len, chunks))
    if is_answer and size > MAX_ANSWER_BYTES:
        del chunks
        log.warning(
            "answer %s of %d bytes refused (limit %d)", shown(msg_id), size, MAX_ANSWER_BYTES
        )
        return [
            error_body(
                msg_id,
                INTERNAL_ERROR,
                f"Internal error: the answer would be {size:,} bytes, more than the "
                f"{MAX_ANSWER_BYTES:,} one answer may carry; ask for less at a time "
                "(chatHistory/get: pages with limit and beforeId)",
                {"answerBytes": size, "maxAnswerBytes": MAX_ANSWER_BYTES},
            )
        ]
    return chunks


def error_body(msg_id: Any, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error answer's encoded frame body (written where ``protocol`` cannot be reached:
    an answer too large to send)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": msg_id, "error": error}, repr)


def plain(value: Any) -> Any:
    """``default`` for a message of this server's own (its values are JSON already): an enum as
    its value; anything else is not JSON (``answer_body`` then answers with an error)."""
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def notify_all(writer: FrameWriter, method: str, params: Sequence[Any]) -> None:
    """Notifications written in one write (every write wakes the client)."""
    parts: list[bytes] = []
    for one in params:
        body = encode({"jsonrpc": "2.0", "method": method, "params": one}, repr)
        parts += [frame_header(len(body)), body]
    writer.write_parts(*parts)
