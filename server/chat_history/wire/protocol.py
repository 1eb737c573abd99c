"""What every family of wire methods shares: the one cattrs converter (camelCase on the wire,
strict primitives) and ``structure``, the keys every conversation method takes (``KeyParams``),
the outbound translation of results into camelCase (``wire``, ``wire_message``, the
notifications' params), and ``wire_field``/``wire_error``, the one translation of a domain
error's snake_case field id into the wire path it names. The checks are in ``wire/checks.py``,
messages and tools in ``wire/messages.py``, each method family in ``wire/methods/``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

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
)
from chat_history.model import (
    JsonText,
    PruneReport,
    StoredMessage,
    Summary,
    Trimmed,
)
from chat_history.policy.changes import Change
from chat_history.settings import empty_object
from chat_history.store import EngineOptions

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


@attrs.define
class KeyParams:
    """The keys every conversation method takes: ``conversationId``, and ``workspace`` (default: the
    session's)."""

    conversation_id: str
    workspace: str | None = None


#: ``updateConversation``'s ``title`` when the request does not name it (null restores the
#: automatic title, so it cannot stand for "absent").
ABSENT: Any = attrs.make_class("Absent", [])()


@attrs.define
class InitOptions:
    """``initializationOptions`` (protocol.md), structured by the one converter; each value as
    the client sent it: ``initialize`` warns of a bad ``storagePath`` or ``workspaceIdentity``
    and the store checks the engine's (``engine``)."""

    storage_path: Any = None
    workspace: Any = None
    workspace_identity: Any = None
    settings: Any = None
    database: Any = None
    purge_seconds: Any = None

    def engine(self) -> EngineOptions:
        """What the options name of the engine, for ``store.database_option``/``purge_option``."""
        return EngineOptions(database=self.database, purge_seconds=self.purge_seconds)


def init_options(raw: Any) -> InitOptions:
    """``initializationOptions`` typed; anything but an object is no options (as before)."""
    raw = empty_object(raw)
    return structure(raw, InitOptions) if isinstance(raw, dict) else InitOptions()


@attrs.define
class NoParams:
    """A method without params (``chatHistory/listWorkspaces``)."""


def _strict(kind: type, label: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {label}, got a boolean")
        if not isinstance(value, kind):
            raise TypeError(f"expected {label}, got {json_type(value)}")
        return value

    return hook


def json_type(value: Any) -> str:
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
        raise TypeError(f"expected an object, got {json_type(value)}")
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
                raise TypeError(f"expected an object, got {json_type(value)}")
            return inner(value, target)

        return structure

    conv.register_structure_hook_factory(attrs.has, attrs_hook)

    def list_hook(cls: Any) -> Callable[[Any, Any], Any]:
        inner = list_structure_factory(cls, conv)

        def structure(value: Any, target: Any) -> Any:
            if not isinstance(value, list):
                raise TypeError(f"expected an array, got {json_type(value)}")
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
        raise InvalidParams("params", f"expected an object, got {json_type(params)}")
    try:
        return converter.structure(params, cls)
    except Exception as exc:  # cattrs raises exception groups of many kinds
        field, why = error_path(exc, "")
        raise InvalidParams(field or "params", why) from None


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
        "origin": row.origin.as_json() if row.origin is not None else None,
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
