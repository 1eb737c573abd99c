"""Paging of ``listConversations`` (protocol.md "Version 2" → Conversations): the order (newest
activity first, ties by conversationId, then workspace) and the opaque cursor naming the last
conversation of a page.

A cursor is ``c1.`` + unpadded urlsafe base64 of the JSON array ``[lastActivity,
conversationId, workspace]``. It is not signed (it grants nothing: it only says where a page
ends), but its shape is checked exactly — anything the server could not have handed out is
InvalidParams ``cursor``. The page after a cursor is every conversation that sorts after it, so
paging stays consistent when conversations are added, removed or touched between pages (a
touched one moves to the front and is not repeated on later pages).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs

from chat_history.errors import InvalidParams

CURSOR_PREFIX = "c1."
#: The longest conversationId (protocol.md "Keys").
_MAX_ID = 256


@attrs.frozen
class CursorPosition:
    """Where a page ended: the last listed conversation's activity and keys."""

    last_activity: int | None
    conversation_id: str
    workspace: str


def order_key(last_activity: int | None, conversation_id: str, workspace: str) -> tuple[Any, ...]:
    """Sort key of the listing order: newest activity first (no activity last), then
    conversationId, then workspace, ascending."""
    return (last_activity is None, -(last_activity or 0), conversation_id, workspace)


def encode_cursor(position: CursorPosition) -> str:
    """The opaque cursor a page hands out for its last conversation."""
    payload = json.dumps(
        [position.last_activity, position.conversation_id, position.workspace],
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    return CURSOR_PREFIX + base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def _bad() -> InvalidParams:
    return InvalidParams("cursor", "is not a cursor this server handed out")


def decode_cursor(cursor: str) -> CursorPosition:
    """The position ``cursor`` names, or InvalidParams ``cursor`` for anything that
    :func:`encode_cursor` could not have produced."""
    if not cursor.startswith(CURSOR_PREFIX) or not cursor.isascii():
        raise _bad()
    body = cursor[len(CURSOR_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        raise _bad() from None
    if not isinstance(value, list) or len(value) != 3:
        raise _bad()
    activity, conversation_id, workspace = value
    if activity is not None and (type(activity) is not int or activity < 0):
        raise _bad()
    if not isinstance(conversation_id, str) or not 0 < len(conversation_id) <= _MAX_ID:
        raise _bad()
    if not isinstance(workspace, str):
        raise _bad()
    position = CursorPosition(activity, conversation_id, workspace)
    if encode_cursor(position) != cursor:  # one spelling per position: no altered copies
        raise _bad()
    return position
