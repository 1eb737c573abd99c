"""Domain errors as JSON-RPC errors (protocol.md, Errors): their codes, and the one mapping from
one to the other (``to_jsonrpc``)."""

from __future__ import annotations

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from chat_history.errors import (
    ContextOverflow,
    ConversationChanged,
    InvalidParams,
    ReplyInProgress,
    StorageError,
)
from chat_history.wire import protocol


class ContextOverflowError(JsonRpcException):
    """JSON-RPC error 1001: the conversation cannot fit the context budget (protocol.md, Errors)."""

    CODE = 1001
    MESSAGE = "Context overflow"


class StorageFailure(JsonRpcException):
    """JSON-RPC error 1002: the database failed; the message says why (protocol.md, Errors)."""

    CODE = 1002
    MESSAGE = "Storage error"


class ConversationChangedError(JsonRpcException):
    CODE = 1003
    MESSAGE = "Conversation changed"


class ReplyInProgressError(JsonRpcException):
    CODE = 1004
    MESSAGE = "Reply in progress"


#: The domain errors a request answers with an error code (to_jsonrpc).
DOMAIN_ERRORS = (InvalidParams, ContextOverflow, StorageError, ConversationChanged, ReplyInProgress)


def to_jsonrpc(exc: Exception) -> JsonRpcException:
    """The one mapping of domain errors to JSON-RPC error codes (protocol.md, Errors)."""
    if not isinstance(exc, DOMAIN_ERRORS):
        raise exc
    message, data = protocol.wire_error(exc)
    if isinstance(exc, InvalidParams):
        return JsonRpcInvalidParams(message=message, data=data)
    if isinstance(exc, ContextOverflow):
        return ContextOverflowError(message=message, data=data)
    if isinstance(exc, ConversationChanged):
        return ConversationChangedError(message=message, data=data)
    if isinstance(exc, ReplyInProgress):
        return ReplyInProgressError(message=message, data=data)
    return StorageFailure(message=message, data=data)
