"""Domain errors raised by the core; ``server.py`` maps each to its JSON-RPC code in one place."""

from __future__ import annotations


class ChatHistoryError(Exception):
    """Base class of the errors the core raises on purpose."""


class InvalidParams(ChatHistoryError):
    """A malformed or out-of-range input (-32602); ``field`` is its wire path, such as
    ``messages[3].role``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}" if field else why)
        self.field = field
        self.why = why


class ContextOverflow(ChatHistoryError):
    """The prepared request does not fit the model's known context window (1001)."""

    def __init__(self, estimated_tokens: int, context_window: int) -> None:
        super().__init__(
            f"the prepared request needs about {estimated_tokens} tokens, more than the model's "
            f"context window of {context_window} even after trimming"
        )
        self.estimated_tokens = estimated_tokens
        self.context_window = context_window


class StorageError(ChatHistoryError):
    """The database cannot be opened or written (1002)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"storage error: {reason}")
        self.reason = reason
