"""Wire types of protocol.md: attrs params structured by one cattrs converter (camelCase on the
wire, strict primitives), the semantic checks that name the offending field, and the camelCase
results, and ``wire_field``/``wire_error``, the one translation of a domain error's snake_case
field id into the wire path it names. The only module that knows camelCase (besides the export
format's translator, ``cli/transfer.py``)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, override

from chat_history.errors import (
    ChatHistoryError,
    ContextOverflow,
    ConversationChanged,
    InvalidParams,
    ReplyInProgress,
    StorageError,
    quoted,
)
from chat_history.model import (
    MAX_JSON_DEPTH,
    ROLES,
    Attachment,
    Expected,
    ExpectedLast,
    JsonText,
    Message,
    PruneReport,
    Status,
    StoredMessage,
    Summary,
    ToolCall,
    ToolSpec,
    Trimmed,
    nesting_exceeds,
)
from chat_history.policy.changes import Change
from chat_history.policy.identity import normalize_uri, request_workspace
from chat_history.policy.rewind import check_turns
from chat_history.policy.search import check_query
from chat_history.policy.search_rank import SearchScope
from chat_history.service.conversations import ConversationUpdate, MessageEdit
from chat_history.settings import empty_object
from chat_history.wire import frames

if TYPE_CHECKING:  # the manager's result types, translated below (no import at run time)
    from chat_history.service.conversations import ConversationInfo, ConversationPage
    from chat_history.service.manager import AppendResult, GetResult, SearchResult
    from chat_history.service.preparation import PrepareOptions
    from chat_history.service.storage_retention import PruneRun
    from chat_history.store import DatabaseStats

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

T = TypeVar("T")


def camel(name: str) -> str:
    """A snake_case name as the wire spells it (``covers_through_id`` → ``coversThroughId``)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_SNAKE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def wire_field(field: str) -> str:
    """The one translation of a domain error's field id into the wire path it names: each name
    camelCased like every wire key (``messages[3].tool_call_id`` → ``messages[3].toolCallId``,
    ``through_id`` → ``throughId``). A wire path (the checks below raise those) is unchanged."""
    return _SNAKE_NAME.sub(lambda m: camel(m.group()), field)


# -- params ------------------------------------------------------------------------------------


@attrs.define
class ToolCallIn:
    """A tool call as a request carries it, every field unchecked (``to_message`` checks each and
    names the bad one)."""

    id: Any = None
    name: Any = None
    arguments: Any = None


@attrs.define
class AttachmentIn:
    """An attachment as a request carries it, unchecked: inline ``data`` or a ``uri``
    (``to_message`` checks which)."""

    kind: Any = None
    mime_type: Any = None
    data: Any = None
    uri: Any = None


@attrs.define
class MessageIn:
    """A message of ``append``'s ``messages`` as structured from the wire, before ``to_message``
    checks it."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    attachments: list[AttachmentIn] | None = None
    timestamp: Any = None
    provider_data: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: "complete" (absent) or "interrupted": a cut reply the client kept (version 4)
    status: Any = None


@attrs.define
class KeyParams:
    """The keys every conversation method takes: ``conversationId``, and ``workspace`` (default: the
    session's)."""

    conversation_id: str
    workspace: str | None = None


@attrs.define
class AppendParams(KeyParams):
    """``append``: the messages to store, 1 to ``MAX_MESSAGES`` of them."""

    messages: list[MessageIn] = attrs.field(kw_only=True)


@attrs.define
class GetParams(KeyParams):
    """``get``: the newest ``limit`` rows (all when absent), older than ``beforeId`` when given."""

    limit: int | None = None
    before_id: int | None = None


@attrs.define
class ToolIn:
    """A tool definition ``format``/``prepare`` count and pass to the provider's formatter."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


@attrs.define
class FormatParams(KeyParams):
    """``format``: the provider kind or alias, the model and the tools of the request to shape."""

    provider: str | None = None
    model: str | None = None
    tools: list[ToolIn] | None = None


@attrs.define
class PrepareParams(FormatParams):
    """``prepare``: ``format``'s params and what shapes the window (extra tokens, overflow recovery,
    the tool context kept)."""

    extra_tokens: int | None = None
    overflow_recovery: bool | None = None
    keep_tool_context_turns: int | None = None
    #: version 4: the interrupted newest row the body continues
    continue_id: int | None = None


@attrs.define
class SearchParams:
    """``search``: the query and its scope (one conversation, a workspace or all of them), roles and
    page size."""

    query: str
    conversation_id: str | None = None
    workspace: str | None = None
    all_workspaces: bool | None = None
    roles: list[str] | None = None
    limit: int | None = None


@attrs.define
class SaveSummaryParams(KeyParams):
    """``saveSummary``: the summary text and the newest row it covers (none: it covers no particular
    row)."""

    summary: str = attrs.field(kw_only=True)
    covers_through_id: int | None = None


@attrs.define
class ListParams:
    """``listConversations``: whose conversations (a workspace, or all), and the page (``limit``,
    ``cursor``)."""

    workspace: str | None = None
    all_workspaces: bool | None = None
    limit: int | None = None
    cursor: str | None = None


# Version 2: conversations and edits (translated by the *_args functions below).

#: ``updateConversation``'s ``title`` when the request does not name it (null restores the
#: automatic title, so it cannot stand for "absent").
ABSENT: Any = attrs.make_class("Absent", [])()


@attrs.define
class UpdateConversationParams(KeyParams):
    """``updateConversation``: a title (null: back to the automatic one; ``ABSENT``: left as it is)
    and metadata replacing the old."""

    title: Any = ABSENT
    metadata: dict[str, Any] | None = None


@attrs.define
class TruncateParams(KeyParams):
    """``truncate``: the first row to delete."""

    from_id: int = attrs.field(kw_only=True)
    #: the newest row id the client saw (null: an empty conversation); ABSENT: no check
    expected_last_id: Any = ABSENT


@attrs.define
class DeleteTurnsParams(KeyParams):
    """``deleteTurns``: the turn numbers whose rows go."""

    turns: list[int] = attrs.field(kw_only=True)
    expected_last_id: Any = ABSENT


@attrs.define
class EditMessageParams(KeyParams):
    """``editMessage``: the row and what replaces its content, attachments and/or metadata."""

    id: int = attrs.field(kw_only=True)
    expected_last_id: Any = ABSENT
    content: str | None = None
    attachments: list[AttachmentIn] | None = None
    metadata: dict[str, Any] | None = None


@attrs.define
class ForkParams(KeyParams):
    """``fork``: the new conversation's id (and workspace), and the newest row copied."""

    new_conversation_id: str = attrs.field(kw_only=True)
    through_id: int | None = None
    new_workspace: str | None = None


@attrs.define
class ReportUsageParams:
    """``chatHistory/reportUsage``: no conversation key (calibration is per provider and model)."""

    estimated_tokens: int = attrs.field(kw_only=True)
    prompt_tokens: int = attrs.field(kw_only=True)
    provider: str | None = None
    model: str | None = None


@attrs.define
class MoveWorkspaceParams:
    """``chatHistory/moveWorkspace``: no conversation key."""

    from_: str = attrs.field(kw_only=True)
    to: str = attrs.field(kw_only=True)


@attrs.define
class NoParams:
    """A method without params (``chatHistory/listWorkspaces``)."""


def move_args(params: MoveWorkspaceParams) -> tuple[str, str]:
    return check_workspace(params.from_, "from"), check_workspace(params.to, "to")


def _strict(kind: type, label: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {label}, got a boolean")
        if not isinstance(value, kind):
            raise TypeError(f"expected {label}, got {_json_type(value)}")
        return value

    return hook


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _object(value: Any, _: Any) -> dict[str, Any]:
    value = empty_object(value)
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {_json_type(value)}")
    return value


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter()
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(bool, _strict(bool, "a boolean"))
    conv.register_structure_hook_func(lambda t: t == dict[str, Any], _object)

    def attrs_hook(cls: type) -> Callable[[Any, Any], Any]:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel(a.name)) for a in attrs.fields(cls)
        }
        inner: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, conv, **overrides)

        def structure(value: Any, target: Any) -> Any:
            value = empty_object(value)
            if not isinstance(value, dict):
                raise TypeError(f"expected an object, got {_json_type(value)}")
            return inner(value, target)

        return structure

    conv.register_structure_hook_factory(attrs.has, attrs_hook)

    def list_hook(cls: Any) -> Callable[[Any, Any], Any]:
        inner = list_structure_factory(cls, conv)

        def structure(value: Any, target: Any) -> Any:
            if not isinstance(value, list):
                raise TypeError(f"expected an array, got {_json_type(value)}")
            return inner(value, target)

        return structure

    conv.register_structure_hook_factory(
        lambda t: getattr(t, "__origin__", None) is list, list_hook
    )
    return conv


converter = _make_converter()


def error_path(exc: BaseException, path: str) -> tuple[str, str]:
    """The first leaf error of a cattrs exception group, as (wire path, reason)."""
    if isinstance(exc, IterableValidationError):
        indexed, unindexed = exc.group_exceptions()
        for inner, index_note in indexed:
            return error_path(inner, f"{path}[{index_note.index}]")
        if unindexed:
            return error_path(unindexed[0], path)
    if isinstance(exc, ClassValidationError):
        named, unnamed = exc.group_exceptions()
        for inner, name_note in named:
            name = camel(name_note.name)
            return error_path(inner, f"{path}.{name}" if path else name)
        if unnamed:
            return error_path(unnamed[0], path)
    if isinstance(exc, ForbiddenExtraKeysError):
        return path, f"unknown field(s) {sorted(exc.extra_fields)}"
    if isinstance(exc, KeyError):
        return path, "is required"
    return path, str(exc) or type(exc).__name__


def structure(params: Any, cls: type[T]) -> T:
    """Structure raw JSON params into ``cls``; any mismatch is InvalidParams naming the field."""
    params = empty_object(params)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("params", f"expected an object, got {_json_type(params)}")
    try:
        return converter.structure(params, cls)
    except Exception as exc:  # cattrs raises exception groups of many kinds
        field, why = error_path(exc, "")
        raise InvalidParams(field or "params", why) from None


# -- semantic checks -----------------------------------------------------------------------------

_MIME = re.compile(r"^image/[a-z0-9.+-]+$")


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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
        identity (policy.identity.request_workspace)."""
        if value is None:
            return self.identity
        return request_workspace(check_workspace(value, field), self.identity, self.folder)


def check_key(params: KeyParams, session: SessionWorkspace) -> tuple[str, str]:
    """The request's (workspace, conversationId), checked; the session's workspace when it names
    none."""
    conversation = check_id(params.conversation_id, "conversationId")
    return session.named(params.workspace), conversation


def check_workspace(value: str, field: str = "workspace") -> str:
    """A workspace identity, normalized (a ``file:`` URI has one spelling per folder, protocol.md
    "Workspace identity"): the one rule of the server's requests and of ``chat-history
    import``, so whatever the server stored can be exported and imported again."""
    return normalize_uri(check_id(value, field, MAX_WORKSPACE_CHARS))


def check_id(value: str, field: str, max_chars: int = MAX_ID_CHARS) -> str:
    """A non-empty id of at most ``max_chars`` characters, else InvalidParams ``field``."""
    if not value:
        raise InvalidParams(field, "must be a non-empty string")
    return check_text(value, field, max_chars)


def check_int(value: int | None, field: str, low: int, high: int = MAX_INT) -> int | None:
    """An integer (or absent) within ``low``..``high``, else InvalidParams ``field``."""
    if value is not None and not low <= value <= high:
        raise InvalidParams(field, f"must be between {low:,} and {high:,} (got {quoted(value)})")
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
            raise InvalidParams(field, f"{quoted(value)} is not an ISO-8601 date-time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        # Integer arithmetic: float timestamp() * 1000 is off by one millisecond for some instants.
        millis = (moment - _EPOCH) // timedelta(milliseconds=1)
        check_int(millis, field, 0, 253_402_300_799_999)
        return millis
    raise InvalidParams(field, "expected epoch milliseconds or an ISO-8601 string")


def _tool_call(raw: ToolCallIn, field: str) -> ToolCall:
    if not isinstance(raw.id, str):
        raise InvalidParams(f"{field}.id", "must be a non-empty string")
    if not isinstance(raw.name, str):
        raise InvalidParams(f"{field}.name", "must be a non-empty string")
    arguments = empty_object(raw.arguments) if raw.arguments is not None else {}
    if isinstance(arguments, str):
        check_text(arguments, f"{field}.arguments", MAX_JSON_FIELD_CHARS)
        try:
            parsed = json.loads(arguments, parse_constant=_no_constant) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise InvalidParams(
                f"{field}.arguments", "is a string but not JSON (send an object or a JSON string)"
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidParams(f"{field}.arguments", "must be a JSON object")
        check_depth(parsed, f"{field}.arguments")
    elif isinstance(arguments, dict):
        check_json(arguments, f"{field}.arguments")
    else:
        raise InvalidParams(f"{field}.arguments", "expected an object or a JSON string")
    return ToolCall(
        id=check_id(raw.id, f"{field}.id"),
        name=check_id(raw.name, f"{field}.name"),
        arguments=arguments,
    )


def _attachment(raw: AttachmentIn, field: str) -> Attachment:
    if raw.kind != "image":
        raise InvalidParams(f"{field}.kind", 'must be "image"')
    if (raw.data is None) == (raw.uri is None):
        raise InvalidParams(field, "needs exactly one of data (base64) or uri")
    mime = raw.mime_type
    if mime is not None and (not isinstance(mime, str) or not _MIME.match(mime)):
        raise InvalidParams(f"{field}.mimeType", "must be an image media type like image/png")
    if raw.data is not None:
        if not isinstance(raw.data, str) or not raw.data:
            raise InvalidParams(f"{field}.data", "must be a non-empty base64 string")
        check_text(raw.data, f"{field}.data", MAX_ATTACHMENT_CHARS)
        try:
            base64.b64decode(raw.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidParams(f"{field}.data", "is not valid base64") from None
        if mime is None:
            raise InvalidParams(f"{field}.mimeType", "is required with data")
        return Attachment(mime_type=mime, data=raw.data)
    if not isinstance(raw.uri, str) or not raw.uri:
        raise InvalidParams(f"{field}.uri", "must be a non-empty string")
    return Attachment(mime_type=mime, uri=check_text(raw.uri, f"{field}.uri", MAX_CONTENT_CHARS))


def to_message(raw: MessageIn, field: str) -> Message:
    """One wire message checked field by field into a Message; InvalidParams names the path of the
    first bad field under ``field`` (``messages[3].toolCalls[0].id``)."""
    if raw.role not in ROLES:
        raise InvalidParams(
            f"{field}.role", f"unknown role {quoted(raw.role)}; expected one of {', '.join(ROLES)}"
        )
    role = raw.role
    if raw.tool_calls and role != "assistant":
        raise InvalidParams(f"{field}.toolCalls", "only assistant messages carry tool calls")
    calls = tuple(
        _tool_call(c, f"{field}.toolCalls[{i}]") for i, c in enumerate(raw.tool_calls or [])
    )
    if len({c.id for c in calls}) != len(calls):
        raise InvalidParams(f"{field}.toolCalls", "tool call ids must be unique")
    if role == "tool":
        if raw.tool_call_id is None:
            raise InvalidParams(f"{field}.toolCallId", "is required on tool messages")
        check_id(raw.tool_call_id, f"{field}.toolCallId")
    elif raw.tool_call_id is not None:
        raise InvalidParams(f"{field}.toolCallId", "is only allowed on tool messages")
    content = raw.content
    if content is None:
        if not calls:
            raise InvalidParams(
                f"{field}.content",
                "is required (only an assistant message with toolCalls may omit it)",
            )
        content = ""
    check_text(content, f"{field}.content", MAX_CONTENT_CHARS)
    if raw.name is not None:
        check_id(raw.name, f"{field}.name")
    attachments = tuple(
        _attachment(a, f"{field}.attachments[{i}]") for i, a in enumerate(raw.attachments or [])
    )
    return Message(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=raw.tool_call_id,
        name=raw.name,
        attachments=attachments,
        timestamp=parse_timestamp(raw.timestamp, f"{field}.timestamp"),
        provider_data=check_json(raw.provider_data or {}, f"{field}.providerData"),
        metadata=check_json(raw.metadata or {}, f"{field}.metadata"),
        status=_status(raw, field),
    )


def _status(raw: MessageIn, field: str) -> Status:
    """A message's ``status``: complete, or interrupted on an assistant row (only beginReply
    makes a streaming one)."""
    if raw.status is None or raw.status == "complete":
        return "complete"
    if raw.status != "interrupted" or raw.role != "assistant":
        raise InvalidParams(
            f"{field}.status", '"interrupted" on an assistant message is the only status sent'
        )
    return "interrupted"


def to_messages(params: AppendParams) -> list[Message]:
    """``append``'s messages checked into Messages, in order."""
    if not 1 <= len(params.messages) <= MAX_MESSAGES:
        raise InvalidParams(
            "messages", f"must hold 1 to {MAX_MESSAGES:,} messages (got {len(params.messages):,})"
        )
    return [to_message(m, f"messages[{i}]") for i, m in enumerate(params.messages)]


def to_tools(tools: Sequence[ToolIn] | None) -> tuple[ToolSpec, ...] | None:
    """``tools`` checked into ToolSpecs (at most ``MAX_TOOLS``); None when the request has none."""
    if tools is None:
        return None
    if len(tools) > MAX_TOOLS:
        raise InvalidParams("tools", f"at most {MAX_TOOLS} tools")
    return tuple(
        ToolSpec(
            name=check_id(t.name, f"tools[{i}].name"),
            description=(
                check_text(t.description, f"tools[{i}].description", MAX_CONTENT_CHARS)
                if t.description is not None
                else None
            ),
            parameters=(
                check_json(t.parameters, f"tools[{i}].parameters")
                if t.parameters is not None
                else None
            ),
        )
        for i, t in enumerate(tools)
    )


# -- results -------------------------------------------------------------------------------------


def wire_message(row: StoredMessage) -> dict[str, Any]:
    """A stored row as the wire's StoredMessage."""
    return {
        "id": row.id,
        "turn": row.turn,
        "tokens": row.tokens,
        "role": row.role,
        "content": row.content,
        "toolCalls": [c.as_json() for c in row.tool_calls],
        "toolCallId": row.tool_call_id,
        "name": row.name,
        "attachments": [a.as_json() for a in row.attachments],
        "timestamp": row.timestamp,
        "providerData": dict(row.provider_data),
        "metadata": dict(row.metadata),
        "status": row.status,
    }


_WIRE_NAMES: dict[type, tuple[tuple[str, str], ...]] = {}


def _wire_names(cls: type) -> tuple[tuple[str, str], ...]:
    """(field, camelCase key) of an attrs class, worked out once."""
    names = _WIRE_NAMES.get(cls)
    if names is None:
        names = _WIRE_NAMES[cls] = tuple((f.name, camel(f.name)) for f in attrs.fields(cls))
    return names


def wire(value: Any) -> Any:
    """camelCase JSON of an attrs result (every field kept, even when it equals its default).
    A dict is JSON already (provider bodies, ``providerData``, ``metadata``) and is not copied."""
    if isinstance(value, dict | JsonText):
        return value
    if attrs.has(type(value)):
        if isinstance(value, StoredMessage):
            return wire_message(value)
        return {wired: wire(getattr(value, name)) for name, wired in _wire_names(type(value))}
    if isinstance(value, list | tuple):
        return [wire(v) for v in value]
    if isinstance(value, Mapping):
        return {k: wire(v) for k, v in value.items()}
    return value


def wire_summary(summary: Summary | None) -> dict[str, Any] | None:
    """A summary as the wire's Summary; null when there is none."""
    return wire(summary) if summary is not None else None


def wire_prune(report: PruneReport | None) -> dict[str, Any] | None:
    """What retention deleted as the wire's PruneReport; null when it deleted nothing."""
    return wire(report) if report is not None else None


def wire_trimmed(workspace: str, conversation: str, event: Trimmed) -> dict[str, Any]:
    """The params of one ``chatHistory/trimmed`` notification for the conversation."""
    return {"workspace": workspace, "conversationId": conversation, **wire(event)}


def wire_changed(workspace: str, change: Change) -> dict[str, Any]:
    """A ``chatHistory/changed`` notification's params."""
    return {
        "workspace": workspace,
        "conversationId": change.conversation,
        "lastId": change.last_id,
        "reason": change.reason,
    }


# -- per-method translators: wire params -> manager arguments, manager results -> wire -----------


def get_args(params: GetParams) -> tuple[int | None, int | None]:
    """``chatHistory/get``'s page: (limit, beforeId), range-checked."""
    return (
        check_int(params.limit, "limit", 1, MAX_PAGE),
        check_int(params.before_id, "beforeId", 0),
    )


def model_arg(model: str | None) -> str | None:
    """A requested model name: text the store can keep (it keys the calibration table), so a
    lone surrogate is refused naming ``model``."""
    return None if model is None else check_text(model, "model", MAX_CONTENT_CHARS)


def format_args(params: FormatParams) -> tuple[str | None, str | None]:
    """``chatHistory/format``'s (provider, model). Its tools are checked as ``prepare``'s are,
    though the whole history is sent whatever they are."""
    to_tools(params.tools)
    return params.provider, params.model


def prepare_options(params: PrepareParams) -> PrepareOptions:
    """``chatHistory/prepare``'s options, range-checked."""
    from chat_history.service.preparation import PrepareOptions  # lazily: it loads every provider

    return PrepareOptions(
        provider=params.provider,
        model=model_arg(params.model),
        tools=to_tools(params.tools),
        extra_tokens=check_int(params.extra_tokens, "extraTokens", 0) or 0,
        overflow_recovery=bool(params.overflow_recovery),
        keep_tool_context_turns=check_int(
            params.keep_tool_context_turns, "keepToolContextTurns", 0
        ),
        continue_id=check_int(params.continue_id, "continue_id", 0),
    )


def summary_args(params: SaveSummaryParams) -> tuple[str, int | None]:
    """``chatHistory/saveSummary``'s (summary, coversThroughId), checked."""
    return (
        check_text(params.summary, "summary", MAX_SUMMARY_CHARS),
        check_int(params.covers_through_id, "coversThroughId", 0),
    )


#: ``chatHistory/search``: the roles searched by default, and the page size (default, largest).
SEARCH_ROLES: tuple[str, ...] = ("user", "assistant")
SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 200


def search_args(params: SearchParams, session: SessionWorkspace) -> tuple[SearchScope, str, int]:
    """``chatHistory/search``'s (scope, query, limit), checked. ``allWorkspaces`` searches every
    workspace (a ``workspace`` given with it is still checked, then not used); ``roles`` may be
    empty (nothing is found). The query's text is data: any character is accepted."""
    query = check_query(params.query)
    roles = SEARCH_ROLES if params.roles is None else tuple(params.roles)
    for i, role in enumerate(roles):
        if role not in ROLES:
            raise InvalidParams(
                f"roles[{i}]", f"unknown role {quoted(role)}; expected one of {', '.join(ROLES)}"
            )
    workspace = session.named(params.workspace)
    conversation = (
        check_id(params.conversation_id, "conversationId")
        if params.conversation_id is not None
        else None
    )
    limit = check_int(params.limit, "limit", 1, MAX_SEARCH_LIMIT) or SEARCH_LIMIT
    scope = SearchScope(
        workspace=None if params.all_workspaces else workspace,
        conversation=conversation,
        roles=tuple(dict.fromkeys(roles)),
    )
    return scope, query, limit


def wire_search(result: SearchResult) -> dict[str, Any]:
    """``search``'s answer: each hit with its conversation, row and snippet, and whether more
    remain."""
    return {
        "results": [
            {
                "workspace": hit.workspace,
                "conversationId": hit.conversation,
                "id": hit.id,
                "turn": hit.turn,
                "role": hit.role,
                "timestamp": hit.timestamp,
                "snippet": hit.snippet,
                "highlights": [list(span) for span in hit.highlights],
            }
            for hit in result.hits
        ],
        "hasMore": result.has_more,
    }


def usage_args(params: ReportUsageParams) -> tuple[str | None, str | None, int, int]:
    """``chatHistory/reportUsage``'s (provider, model, estimatedTokens, promptTokens); the
    figures' range is the manager's rule (policy.calibration.check_usage)."""
    return params.provider, model_arg(params.model), params.estimated_tokens, params.prompt_tokens


def wire_append(result: AppendResult) -> dict[str, Any]:
    """``append``'s answer: the stored rows one for one with the request's messages, and what
    retention deleted."""
    return {"messages": wire(result.messages), "pruned": wire_prune(result.pruned)}


def wire_get(result: GetResult) -> dict[str, Any]:
    """Each row's wire dict is made as the answer is written (a JsonArray), so an unlimited
    ``get`` never holds a dict per row of the whole history at once."""
    return {
        "messages": frames.JsonArray(result.messages, wire_message),
        "summary": wire_summary(result.summary),
        "pruned": wire_prune(result.pruned),
        "hasMore": result.has_more,
    }


def wire_cleared(deleted_messages: int) -> dict[str, Any]:
    """``clear``'s answer: how many rows went."""
    return {"deletedMessages": deleted_messages}


def wire_history(workspace: str, conversation: str, result: GetResult) -> dict[str, Any]:
    """``chat-history show --json``: one conversation's rows and summary."""
    return {
        "workspace": workspace,
        "conversationId": conversation,
        "messages": wire(result.messages),
        "summary": wire_summary(result.summary),
    }


def wire_stats(
    path: str,
    file_bytes: int,
    wal_bytes: int,
    stats: DatabaseStats,
    settings: Mapping[str, Any],
    sources: Mapping[str, str],
) -> dict[str, Any]:
    """``chat-history stats --json``."""
    return {
        "database": path,
        "fileBytes": file_bytes,
        "walBytes": wal_bytes,
        "messages": stats.messages,
        "conversations": stats.conversations,
        "workspaces": stats.workspaces,
        "summaries": stats.summaries,
        "oldestMessage": stats.oldest_timestamp,
        "newestMessage": stats.newest_timestamp,
        "settings": dict(settings),
        "settingSources": dict(sources),
    }


# -- version 2: conversations and edits ------------------------------------------------------------

#: ``listConversations`` pages hold 1 to 1,000 conversations.
MAX_LIST_PAGE = 1_000


def list_args(
    params: ListParams, session: SessionWorkspace
) -> tuple[str | None, int | None, str | None]:
    """``listConversations``'s (workspace — None for every workspace —, limit, cursor); the
    cursor is checked against the database's key when the listing reads it."""
    workspace = None if params.all_workspaces else session.named(params.workspace)
    limit = check_int(params.limit, "limit", 1, MAX_LIST_PAGE)
    return workspace, limit, params.cursor


def update_args(params: UpdateConversationParams) -> ConversationUpdate:
    """``updateConversation``'s change: a title of 1-200 code points or null, an object of
    metadata."""
    title = params.title
    set_title = title is not ABSENT
    if set_title and title is not None:
        if not isinstance(title, str):
            raise InvalidParams("title", f"expected a string or null, got {_json_type(title)}")
        check_text(title, "title", MAX_CONTENT_CHARS)  # the title's own bounds: the service
    metadata = params.metadata
    if metadata is not None:
        check_json(metadata, "metadata")
    return ConversationUpdate(
        set_title=set_title, title=title if set_title else None, metadata=metadata
    )


def row_id(value: int, field: str) -> int:
    """A row id a request names: any id that could exist (one that does not is refused later,
    by the same field)."""
    checked = check_int(value, field, 0)
    assert checked is not None
    return checked


def expected_last(params: TruncateParams | DeleteTurnsParams | EditMessageParams) -> Expected:
    """``expectedLastId``: absent (no check), null (the client saw no rows) or a row id."""
    value = params.expected_last_id
    if value is ABSENT:
        return None
    if value is None:
        return ExpectedLast(None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidParams(
            "expected_last_id", f"expected a row id or null, got {_json_type(value)}"
        )
    return ExpectedLast(check_int(value, "expected_last_id", 0))


def turns_arg(params: DeleteTurnsParams) -> list[int]:
    """``deleteTurns``'s turn numbers: 1-1,000 of them, none negative (``turns[i]``)."""
    check_turns(params.turns)
    for index, turn in enumerate(params.turns):
        check_int(turn, f"turns[{index}]", 0)
    return list(params.turns)


def edit_args(params: EditMessageParams) -> tuple[int, MessageEdit]:
    """``editMessage``'s (id, what it replaces), checked as ``append`` checks a message."""
    content = params.content
    if content is not None:
        check_text(content, "content", MAX_CONTENT_CHARS)
    attachments = None
    if params.attachments is not None:
        attachments = tuple(
            _attachment(a, f"attachments[{i}]") for i, a in enumerate(params.attachments)
        )
    metadata = check_json(params.metadata, "metadata") if params.metadata is not None else None
    edit = MessageEdit(content=content, attachments=attachments, metadata=metadata)
    return row_id(params.id, "id"), edit


def fork_args(
    params: ForkParams, source_workspace: str, session: SessionWorkspace
) -> tuple[str, str, int | None]:
    """``fork``'s (target workspace — the source's by default —, target id, throughId)."""
    target = check_id(params.new_conversation_id, "newConversationId")
    workspace = (
        session.named(params.new_workspace, "newWorkspace")
        if params.new_workspace is not None
        else source_workspace
    )
    through = None if params.through_id is None else row_id(params.through_id, "throughId")
    return workspace, target, through


def wire_page(page: ConversationPage) -> dict[str, Any]:
    """A ``listConversations`` page: its conversations and the next page's cursor."""
    return {**wire_listing(page.conversations), "nextCursor": page.next_cursor}


def wire_listing(conversations: Sequence[ConversationInfo]) -> dict[str, Any]:
    """Conversations as ``listConversations`` lists them (``chat-history conversations --json``
    prints the same entries, grouped by workspace)."""
    return {"conversations": wire(conversations)}


def wire_prune_run(run: PruneRun) -> dict[str, Any]:
    """``chat-history prune --json``: a storage retention run, in the wire's spelling."""
    return {
        "dryRun": run.dry_run,
        "conversationsChecked": run.checked,
        "droppedMessages": run.dropped_messages,
        "deletedSummaries": run.deleted_summaries,
        "reasons": {
            rule: {"messages": m, "turns": t, "conversations": c}
            for rule, (m, t, c) in run.per_rule.items()
        },
        "conversations": [
            {
                "workspace": item.key.workspace,
                "conversationId": item.key.conversation,
                "droppedMessages": item.dropped_messages,
                "retainedTurns": item.retained_turns,
                "reasons": {
                    rule: {"messages": m, "turns": t} for rule, (m, t) in item.reasons.items()
                },
                "summaryDeleted": item.summary_deleted,
            }
            for item in run.conversations
        ],
    }


def wire_deleted(deleted: bool) -> dict[str, Any]:
    """``chatHistory/deleteSummary``'s result."""
    return {"deleted": deleted}


def capabilities(protocol_version: int, provider_kinds: Sequence[str]) -> dict[str, Any]:
    """``initialize``'s ``capabilities.experimental``: the protocol version and the kinds."""
    return {"chatHistory": {"protocolVersion": protocol_version, "providers": list(provider_kinds)}}


# -- errors --------------------------------------------------------------------------------------

#: Error codes that answer bad input or a known condition, not a server defect. (The classes
#: that carry them are in server.py: pygls's exceptions import lsprotocol, ~0.5 s the CLI, which
#: uses this module too, must not pay.)
EXPECTED_CODES = frozenset({-32600, -32602, -32002, 1001, 1002, 1003, 1004})


def wire_error(exc: ChatHistoryError) -> tuple[str, dict[str, Any]]:
    """A domain error's JSON-RPC ``message`` and ``data`` (protocol.md, Errors): the field a
    bad input names as its wire path, the figures of an overflow, the reason storage failed."""
    if isinstance(exc, InvalidParams):
        field = wire_field(exc.field)
        return (f"{field}: {exc.why}" if field else exc.why), {"field": field}
    if isinstance(exc, ContextOverflow):
        data = {"estimatedTokens": exc.estimated_tokens, "contextWindow": exc.context_window}
        return str(exc), data
    if isinstance(exc, StorageError):
        return str(exc), {"reason": exc.reason}
    if isinstance(exc, ConversationChanged):
        return str(exc), {"lastId": exc.last_id}
    if isinstance(exc, ReplyInProgress):
        return str(exc), {"id": exc.row_id}
    return str(exc), {}
