"""Domain errors as JSON-RPC errors (protocol.md, Errors): their codes, the error a request is
answered with (``RpcError``), and the one mapping from one to the other (``to_jsonrpc``). No
pygls here: the first requests are answered before pygls has loaded."""

from __future__ import annotations

import traceback
from typing import Any

from chat_history.errors import (
    ContextOverflow,
    ConversationChanged,
    InvalidParams,
    ReplyInProgress,
    StorageError,
)
from chat_history.wire import protocol

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
CONTEXT_OVERFLOW = 1001
STORAGE_ERROR = 1002
CONVERSATION_CHANGED = 1003
REPLY_IN_PROGRESS = 1004


class RpcError(Exception):
    """A JSON-RPC error answer: its code, message and ``data`` (omitted when None)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def as_error(self) -> dict[str, Any]:
        """The answer's ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def internal(cls, exc: BaseException) -> RpcError:
        """An unexpected exception as pygls answers one: -32603, the exception's one line and
        its traceback."""
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return cls(INTERNAL_ERROR, message, {"traceback": traceback.format_tb(exc.__traceback__)})

    @classmethod
    def cancelled(cls, msg_id: Any) -> RpcError:
        """A request cancelled (or refused by ``shutdown``) before it started, as pygls words it."""
        return cls(REQUEST_CANCELLED, f'Request with id "{msg_id}" is canceled')


#: The domain errors a request answers with an error code (to_jsonrpc).
DOMAIN_ERRORS = (InvalidParams, ContextOverflow, StorageError, ConversationChanged, ReplyInProgress)


def to_jsonrpc(exc: Exception) -> RpcError:
    """The one mapping of domain errors to JSON-RPC error codes (protocol.md, Errors)."""
    if not isinstance(exc, DOMAIN_ERRORS):
        raise exc
    message, data = protocol.wire_error(exc)
    if isinstance(exc, InvalidParams):
        return RpcError(INVALID_PARAMS, message, data)
    if isinstance(exc, ContextOverflow):
        return RpcError(CONTEXT_OVERFLOW, message, data)
    if isinstance(exc, ConversationChanged):
        return RpcError(CONVERSATION_CHANGED, message, data)
    if isinstance(exc, ReplyInProgress):
        return RpcError(REPLY_IN_PROGRESS, message, data)
    return RpcError(STORAGE_ERROR, message, data)
