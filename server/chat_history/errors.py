"""Domain errors raised by the core, in the domain's own names; ``wire/codes.py`` maps each to
its JSON-RPC code and ``wire/protocol.py`` to its message and data, each in one place."""

from __future__ import annotations

import json
import re
from typing import Any

#: How much of a value an error or warning repeats: enough to recognise it, never megabytes.
SHOWN_CHARS = 100
#: Keys whose values are never repeated (settings of provider aliases hold API keys).
_SECRET_KEY = re.compile(r"api[-_]?key|token|secret|passw|authori[sz]ation|credential", re.I)
REDACTED = "<redacted>"


def redact(value: Any) -> Any:
    """``value`` with the value of every secret-looking key (``apiKey``, ``token``, ``secret``,
    ``password``, ``authorization``…) replaced, at any depth."""
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def is_secret_key(key: str) -> bool:
    """Whether a setting's dotted key (``providers.work.apiKey``) names a secret."""
    return _SECRET_KEY.search(key.rsplit(".", 1)[-1]) is not None


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``value`` as JSON for a message, secrets redacted, cut to ``limit`` characters with an
    ellipsis and the full length."""
    try:
        text = json.dumps(redact(value), ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        text = repr(value)
    return cut(text, limit)


def quoted(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message (``'nope'``), cut like ``shown``."""
    return cut(repr(value), limit)


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """The text as an error shows it: at most ``limit`` characters, then how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


class ChatHistoryError(Exception):
    """Base class of the errors the core raises on purpose."""


class InvalidParams(ChatHistoryError):
    """A malformed or out-of-range input (-32602); ``field`` names it in the domain's words,
    snake_case (``messages[3].tool_call_id``, ``through_id``); ``protocol.wire_field`` turns it
    into the wire path (``messages[3].toolCallId``). The wire's own checks raise wire paths,
    which that translation leaves as they are."""

    def __init__(self, field: str, why: str) -> None:
        field, why = cut(field, 300), cut(why, 1_000)  # never megabytes, whatever the caller
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


class WriteConflict(StorageError):
    """The database aborted a write to break a deadlock or a serialization failure (PostgreSQL's
    SQLSTATE 40P01, 40001): nothing of it happened and running it again may succeed, which the
    store's ``write_retried`` does. Still a 1002 when the attempts run out."""


class ConversationChanged(ChatHistoryError):
    """A rewind named the newest row the client saw, and the conversation's newest row is
    another (1003): nothing changed."""

    def __init__(self, last_id: int | None) -> None:
        super().__init__(
            "conversation changed: another window or process wrote to it since the client "
            f"read it (its newest row is now {last_id}); nothing was changed"
        )
        self.last_id = last_id


class ReplyInProgress(ChatHistoryError):
    """``beginReply`` on a conversation that already has a streaming reply, or ``editMessage``
    of a streaming row (1004): nothing changed. ``row_id`` is the streaming row."""

    def __init__(self, row_id: int) -> None:
        super().__init__(
            f"reply in progress: row {row_id} of this conversation is streaming; end it or wait "
            "until it is interrupted (nothing was changed)"
        )
        self.row_id = row_id
