"""The MCP server's incoming lines, read a second time when the SDK's parser refuses one (a lone
UTF-16 surrogate escape, ``"\\ud83d alpha"``, as a JavaScript agent that cut a string inside an
emoji sends it), so that such a request is answered instead of dropped without a word."""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import Any, Protocol, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("chat_history.mcp")

Item = SessionMessage | Exception


class Source(Protocol):
    """What the SDK's stdio transport yields: messages, and the exceptions of lines it could
    not parse."""

    async def receive(self) -> Item: ...

    async def aclose(self) -> None: ...


def whole(value: Any) -> Any:
    """``value`` (parsed JSON) with each lone surrogate of its strings and keys as U+FFFD."""
    if isinstance(value, str):
        if value.isascii():
            return value
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [whole(item) for item in value]
    if isinstance(value, dict):
        return {whole(key): whole(item) for key, item in value.items()}
    return value


def reread(line: str) -> types.JSONRPCMessage | None:
    """The message of a line the SDK could not parse, read by Python's ``json`` (which takes a
    lone surrogate escape); None when the line is no JSON-RPC message even so. A tool's
    arguments keep their surrogates, so the tool refuses the argument by name
    (``tools.text_arg``); anywhere else (the id, a method or tool name) one becomes U+FFFD, as
    the SDK's transport reads bytes that are not UTF-8, so no answer echoes what cannot be
    written."""
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
        return None
    if not isinstance(parsed, dict):
        return None
    params = parsed.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    message = whole(parsed)
    if parsed.get("method") == "tools/call" and isinstance(message.get("params"), dict):
        message["params"]["arguments"] = arguments
    try:
        return types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return None


def _line_of(error: ValidationError) -> str | None:
    """The line the SDK's transport failed to parse as JSON, from its error."""
    for detail in error.errors():
        if detail.get("type") == "json_invalid" and isinstance(detail.get("input"), str):
            line: str = detail["input"]
            return line
    return None


class Reread:
    """The SDK transport's read stream, each line it could not parse read again (``reread``)."""

    def __init__(self, inner: Source) -> None:
        self._inner = inner

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's context-aware streams carry it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        item = await self._inner.receive()
        if not isinstance(item, ValidationError):
            return item
        line = _line_of(item)
        if line is not None and not line.strip():
            return item  # a blank line between messages: nothing to answer or to tell
        message = reread(line) if line is not None else None
        if message is None:
            log.warning(
                "chat-history mcp: ignored a line that is not a JSON-RPC message (%s)",
                item.errors()[0].get("msg", "unreadable") if item.error_count() else "unreadable",
            )
            return item
        return SessionMessage(message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
