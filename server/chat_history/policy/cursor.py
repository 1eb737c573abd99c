"""Paging of ``listConversations`` (protocol.md "Version 2" → Conversations): the order (newest
activity first, ties by conversationId, then workspace) and the opaque cursor naming the last
conversation of a page.

A cursor is ``c2.`` + unpadded urlsafe base64 of the JSON array ``[lastActivity, conversationId,
workspace]`` + ``.`` + unpadded urlsafe base64 of the first 16 bytes of its HMAC-SHA256 under a
key kept in the database (``store.keys``). A cursor the server did not hand out is
InvalidParams ``cursor``: the tag is checked over the raw bytes before anything is decoded, so a
forged position never reaches a query (an id holding a lone surrogate, an activity past SQLite's
integers), and the decoded position is range-checked all the same. A cursor names a position,
not a conversation: the page after it is every conversation that sorts after it, so paging stays
consistent when conversations are added, removed or touched between pages (a touched one moves
to the front and is not repeated on later pages). A database made anew (deleted, replaced) has a
new key, and the cursors of the old one are refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

import attrs

from chat_history.errors import InvalidParams

CURSOR_PREFIX = "c2."
#: The longest conversationId (protocol.md "Keys").
_MAX_ID = 256
#: The longest workspace (protocol.py MAX_WORKSPACE_CHARS).
_MAX_WORKSPACE = 4_096
#: Far above any cursor handed out (a 4,096-character workspace of six-byte JSON escapes, in
#: base64): longer ones are refused before any decoding.
MAX_CURSOR_CHARS = 64 * 1024
#: SQLite's largest integer: a larger activity could not be bound to a query.
_MAX_ACTIVITY = 2**63 - 1
_TAG_BYTES = 16


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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _tag(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()[:_TAG_BYTES]


def encode_cursor(position: CursorPosition, key: bytes) -> str:
    """The opaque cursor a page hands out for its last conversation, authenticated with
    ``key``. (Stored ids and workspaces are valid Unicode; a lone surrogate is escaped, so
    encoding never fails.)"""
    payload = json.dumps(
        [position.last_activity, position.conversation_id, position.workspace],
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8", "backslashreplace")
    return f"{CURSOR_PREFIX}{_b64(payload)}.{_b64(_tag(key, payload))}"


def _bad() -> InvalidParams:
    return InvalidParams("cursor", "is not a cursor this server handed out")


def _unb64(text: str) -> bytes:
    """Strict unpadded urlsafe base64: one spelling per value (no altered copies)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:
        raise ValueError("not in canonical form")
    return raw


def decode_cursor(cursor: str, key: bytes) -> CursorPosition:
    """The position ``cursor`` names, or InvalidParams ``cursor`` for anything that
    :func:`encode_cursor` with ``key`` did not produce."""
    if (
        len(cursor) > MAX_CURSOR_CHARS
        or not cursor.isascii()
        or not cursor.startswith(CURSOR_PREFIX)
    ):
        raise _bad()
    body, dot, tag = cursor[len(CURSOR_PREFIX) :].partition(".")
    try:
        payload, received = _unb64(body), _unb64(tag)
    except (binascii.Error, ValueError):
        raise _bad() from None
    if not dot or not hmac.compare_digest(received, _tag(key, payload)):
        raise _bad()
    return _position(payload)


def _position(payload: bytes) -> CursorPosition:
    """The checked position of an authenticated payload (checked anyway: a key that leaked
    must not let a cursor reach a query with values no query takes)."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise _bad() from None
    if not isinstance(value, list) or len(value) != 3:
        raise _bad()
    activity, conversation_id, workspace = value
    if activity is not None and (type(activity) is not int or not 0 <= activity <= _MAX_ACTIVITY):
        raise _bad()
    for text, longest in ((conversation_id, _MAX_ID), (workspace, _MAX_WORKSPACE)):
        if not isinstance(text, str) or not 0 < len(text) <= longest:
            raise _bad()
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad() from None
    return CursorPosition(activity, conversation_id, workspace)
