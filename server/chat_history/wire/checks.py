"""The wire's semantic checks, shared by every family of methods: the limits of README
"Limits", ids, text, JSON depth and size, integers in range, timestamps, the request's
workspace and key, ``expectedLastId``. Each names the offending field and never quotes the
client's value."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import attrs

from chat_history.errors import (
    InvalidParams,
)
from chat_history.model import (
    MAX_JSON_DEPTH,
    Expected,
    ExpectedLast,
    nesting_exceeds,
)
from chat_history.policy.identity import checked_identity, request_workspace
from chat_history.service import workspaces
from chat_history.wire.protocol import ABSENT, KeyParams, json_type

# Limits (README "Limits"): large enough for real chats, small enough that no request can
# exhaust memory or the database.
MAX_ID_CHARS = 256
#: a workspace identity is usually a folder URI, which can be long
MAX_WORKSPACE_CHARS = 4_096
MAX_CONTENT_CHARS = 4_000_000
MAX_ATTACHMENT_CHARS = 20_000_000
MAX_MESSAGES = 1_000
MAX_PAGE = 10_000
MAX_SUMMARY_CHARS = 1_000_000
MAX_JSON_FIELD_CHARS = 1_000_000
MAX_TOOLS = 512
MAX_INT = 2**53 - 1  # what a JSON client can represent exactly


# -- semantic checks -----------------------------------------------------------------------------


def check_text(value: str, field: str, max_chars: int) -> str:
    """A string of at most ``max_chars`` characters that SQLite can store as UTF-8 (no lone
    surrogate), else InvalidParams ``field``."""
    if len(value) > max_chars:
        raise InvalidParams(field, f"longer than {max_chars:,} characters ({len(value):,})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidParams(field, "contains a lone surrogate (not valid Unicode)") from None
    return value


def check_depth(value: Any, field: str) -> Any:
    """A JSON value nested at most ``MAX_JSON_DEPTH`` levels deep, else InvalidParams ``field``
    (every later step that walks it recurses)."""
    if nesting_exceeds(value, MAX_JSON_DEPTH):
        raise InvalidParams(field, f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def check_json(value: Any, field: str) -> Any:
    """Depth, then size measured as the compact JSON the store keeps (no spaces after ``,`` and
    ``:``: a client's compact text of up to the limit fits)."""
    check_depth(value, field)
    # allow_nan=False: Python's reader accepts NaN/Infinity, which no JSON client can read back.
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        raise InvalidParams(field, "is not serialisable JSON") from None
    check_text(text, field, MAX_JSON_FIELD_CHARS)
    return value


@attrs.frozen
class SessionWorkspace:
    """The session's workspace identity and the normalized folder URI it came from (the same
    string in ``"folder"`` mode): what a request's ``workspace`` is read against."""

    identity: str
    folder: str = ""

    def named(self, value: str | None, field: str = "workspace") -> str:
        """The identity a request's ``workspace`` (``field``) names, checked: the session's when
        absent; else normalized, the session's own folder in any spelling being the session's
        identity (policy.identity.request_workspace), and a local folder named by its real path
        (a symlink, or a path through one, names its target: service.workspaces.named_workspace)."""
        if value is None:
            return self.identity
        workspace = request_workspace(check_workspace(value, field), self.identity, self.folder)
        if workspace == self.identity:
            return workspace
        real = workspaces.named_workspace(workspace)
        if real == workspace:
            return workspace
        return request_workspace(real, self.identity, workspaces.real_identity(self.folder))


def check_key(params: KeyParams, session: SessionWorkspace) -> tuple[str, str]:
    """The request's (workspace, conversationId), checked; the session's workspace when it names
    none."""
    conversation = check_id(params.conversation_id, "conversationId")
    return session.named(params.workspace), conversation


def check_workspace(value: str, field: str = "workspace") -> str:
    """A workspace identity, normalized (a ``file:`` URI has one spelling per folder, protocol.md
    "Workspace identity"): the one rule of the server's requests and of ``chat-history
    import``, so whatever the server stored can be exported and imported again."""
    return checked_identity(check_id(value, field, MAX_WORKSPACE_CHARS), field)


def check_id(value: str, field: str, max_chars: int = MAX_ID_CHARS) -> str:
    """A non-empty id of at most ``max_chars`` characters, else InvalidParams ``field``."""
    if not value:
        raise InvalidParams(field, "must be a non-empty string")
    return check_text(value, field, max_chars)


def check_int(value: int | None, field: str, low: int, high: int = MAX_INT) -> int | None:
    """An integer (or absent) within ``low``..``high``, else InvalidParams ``field``."""
    if value is not None and not low <= value <= high:
        raise InvalidParams(field, f"must be between {low:,} and {high:,}")
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_timestamp(value: Any, field: str) -> int | None:
    """A timestamp as stored: epoch milliseconds from an integer or an ISO-8601 string (a naive one
    read as UTC); absent is None; anything else is InvalidParams ``field``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidParams(field, "expected epoch milliseconds or an ISO-8601 string")
    if isinstance(value, int):
        check_int(value, field, 0, 253_402_300_799_999)
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidParams(field, "is not an ISO-8601 date-time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        # Integer arithmetic: float timestamp() * 1000 is off by one millisecond for some instants.
        millis = (moment - _EPOCH) // timedelta(milliseconds=1)
        check_int(millis, field, 0, 253_402_300_799_999)
        return millis
    raise InvalidParams(field, "expected epoch milliseconds or an ISO-8601 string")


def model_arg(model: str | None) -> str | None:
    """A requested model name: text the store can keep (it keys the calibration table), so a
    lone surrogate is refused naming ``model``."""
    return None if model is None else check_text(model, "model", MAX_CONTENT_CHARS)


def row_id(value: int, field: str) -> int:
    """A row id a request names: any id that could exist (one that does not is refused later,
    by the same field)."""
    checked = check_int(value, field, 0)
    assert checked is not None
    return checked


class ExpectsLast(Protocol):
    """The params of a method that takes ``expectedLastId`` (the edits, replies)."""

    expected_last_id: Any


def expected_last(params: ExpectsLast) -> Expected:
    """``expectedLastId``: absent (no check), null (the client saw no rows) or a row id."""
    value = params.expected_last_id
    if value is ABSENT:
        return None
    if value is None:
        return ExpectedLast(None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidParams(
            "expected_last_id", f"expected a row id or null, got {json_type(value)}"
        )
    return ExpectedLast(check_int(value, "expected_last_id", 0))
